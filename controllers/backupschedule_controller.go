package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/identity"
)

// BackupScheduleReconciler takes backups on a schedule: at each time of a
// BackupSchedule's cron schedule it creates a MoveOperation from its
// template (a backup), one at a time, and keeps the last of them, as the
// CronJob controller creates and keeps Jobs. The backups themselves are
// MoveOperations like any other, on the one phase table; they are held to
// the schedule's creator's rights, not the operator's (see
// MoveOperationReconciler.creatorObject).
type BackupScheduleReconciler struct {
	// Client reads BackupSchedules and MoveOperations (from the manager's
	// cache) and writes them.
	Client   client.Client
	Recorder events.EventRecorder
	// Self is the operator's own client of the cluster, which asks the API
	// server who the operator is: a backup it creates names it as its
	// creator, as the admission policy wants of any creator.
	Self client.Client
	// ArchiveStore is the store a backup wrote its archive to
	// (MoveOperationReconciler.ArchiveStoreOf): pruning a backup that
	// succeeded removes its archive there first, unless the schedule's
	// spec.archiveReclaimPolicy is Retain.
	ArchiveStore func(context.Context, *movev1alpha1.MoveOperation) (backupstore.Store, error)

	// clock tells the time: time.Now, unless a test sets another.
	clock func() time.Time
}

// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=backupschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=backupschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations,verbs=create;delete

// SetupWithManager registers the reconciler with the manager.
func (r *BackupScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&movev1alpha1.BackupSchedule{}).
		Owns(&movev1alpha1.MoveOperation{}).
		Complete(r)
}

func (r *BackupScheduleReconciler) now() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Now()
}

// Reconcile starts the backup that is due, prunes the history and writes
// the status.
func (r *BackupScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bs := &movev1alpha1.BackupSchedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, bs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !bs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its backups go with it (owner references)
	}
	base := bs.DeepCopy()
	backups := &movev1alpha1.MoveOperationList{}
	if err := r.Client.List(ctx, backups, client.InNamespace(bs.Namespace), client.MatchingLabels{movev1alpha1.BackupScheduleLabel: bs.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the backups of BackupSchedule %s: %w", req.NamespacedName, err)
	}
	// Its backups are those it controls: a label alone, which anyone who
	// may edit a MoveOperation can write, does not make one.
	backups.Items = slices.DeleteFunc(backups.Items, func(mo movev1alpha1.MoveOperation) bool { return !metav1.IsControlledBy(&mo, bs) })
	h := historyOf(backups.Items)
	r.reportFailures(bs, h)
	if err := r.prune(ctx, bs, h); err != nil {
		return ctrl.Result{}, err
	}
	next, err := r.schedule(ctx, bs, h)
	setScheduleStatus(bs, h, r.now())
	if perr := r.Client.Status().Patch(ctx, bs, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
		return ctrl.Result{}, fmt.Errorf("writing the status of BackupSchedule %s: %w", req.NamespacedName, perr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(r.now()), time.Second)}, nil
}

// history is a schedule's backups, oldest first, by how they ended.
type history struct {
	active            *movev1alpha1.MoveOperation
	succeeded, failed []movev1alpha1.MoveOperation
}

func historyOf(items []movev1alpha1.MoveOperation) history {
	slices.SortFunc(items, func(a, b movev1alpha1.MoveOperation) int {
		return scheduledTime(&a).Compare(scheduledTime(&b))
	})
	var h history
	for i := range items {
		switch phaseOf(&items[i]) {
		case movev1alpha1.PhaseDone:
			h.succeeded = append(h.succeeded, items[i])
		case movev1alpha1.PhaseFailed:
			h.failed = append(h.failed, items[i])
		default:
			h.active = &items[i]
		}
	}
	return h
}

// scheduledTime is when a backup was due, by its annotation (its
// creation time, for one without).
func scheduledTime(mo *movev1alpha1.MoveOperation) time.Time {
	if t, err := time.Parse(time.RFC3339, mo.Annotations[movev1alpha1.ScheduledTimeAnnotation]); err == nil {
		return t
	}
	return mo.CreationTimestamp.Time
}

// lastEnded is the last backup that ended, by when it was due; nil for
// none.
func (h history) lastEnded() *movev1alpha1.MoveOperation {
	var last *movev1alpha1.MoveOperation
	for _, list := range [][]movev1alpha1.MoveOperation{h.succeeded, h.failed} {
		for i := range list {
			if last == nil || scheduledTime(last).Before(scheduledTime(&list[i])) {
				last = &list[i]
			}
		}
	}
	return last
}

// schedule starts the backup that is due, if any, and returns when the
// next one is. A time that passed while a backup still ran, or longer ago
// than spec.startingDeadlineSeconds, is missed: counted, and reported.
func (r *BackupScheduleReconciler) schedule(ctx context.Context, bs *movev1alpha1.BackupSchedule, h history) (time.Time, error) {
	sched, err := cron.ParseStandard(bs.Spec.Schedule)
	if err != nil {
		bs.Status.ScheduleError = fmt.Sprintf("spec.schedule %q is not a cron schedule: %v; write five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly", bs.Spec.Schedule, err)
		return time.Time{}, nil
	}
	bs.Status.ScheduleError = ""
	now := r.now().UTC()
	since := bs.CreationTimestamp.Time
	if t := bs.Status.LastScheduleTime; t != nil {
		since = t.Time
	}
	due, skipped := dueTime(sched, since, now)
	if due.IsZero() || bs.Spec.Suspend {
		if bs.Spec.Suspend {
			return time.Time{}, nil
		}
		return sched.Next(now), nil
	}
	bs.Status.LastScheduleTime = &metav1.Time{Time: due}
	deadline := time.Duration(ptr.Deref(bs.Spec.StartingDeadlineSeconds, 300)) * time.Second
	switch {
	case now.Sub(due) > deadline:
		r.missed(bs, skipped+1, fmt.Sprintf("the backup due at %s was not started within spec.startingDeadlineSeconds (%s): the operator was not running", due.Format(time.RFC3339), deadline))
	case h.active != nil:
		r.missed(bs, skipped+1, fmt.Sprintf("the backup due at %s was not started: backup %s still runs", due.Format(time.RFC3339), h.active.Name))
	default:
		if skipped > 0 {
			r.missed(bs, skipped, fmt.Sprintf("%d backups due before %s were not started: the operator was not running", skipped, due.Format(time.RFC3339)))
		}
		if err := r.startBackup(ctx, bs, due); err != nil {
			return time.Time{}, err
		}
	}
	return sched.Next(now), nil
}

// dueTime is the last time of sched after since and not after now (zero
// when none), and how many times before it were skipped.
func dueTime(sched cron.Schedule, since, now time.Time) (time.Time, int32) {
	var due time.Time
	var count int32
	for t := sched.Next(since); !t.After(now); t = sched.Next(t) {
		due = t
		count++
		if count > 10000 { // a schedule missed for years: the count is enough
			break
		}
	}
	if count == 0 {
		return time.Time{}, 0
	}
	return due, count - 1
}

// missed counts and reports backups not taken.
func (r *BackupScheduleReconciler) missed(bs *movev1alpha1.BackupSchedule, n int32, why string) {
	bs.Status.Missed += n
	bs.Status.LastMissed = why
	bs.Status.LastMissedTime = bs.Status.LastScheduleTime
	backupsMissed.WithLabelValues(bs.Namespace, bs.Name).Add(float64(n))
	r.Recorder.Eventf(bs, nil, "Warning", movev1alpha1.ReasonBackupMissed, "Schedule", "%s", why)
}

// startBackup creates the backup due at due: a MoveOperation of the
// template, named after the schedule and the time (so that a second look
// at the same time creates nothing), owned by the schedule, and naming the
// operator as its creator, which the operator reads as the schedule's
// creator (MoveOperationReconciler.creatorObject).
func (r *BackupScheduleReconciler) startBackup(ctx context.Context, bs *movev1alpha1.BackupSchedule, due time.Time) error {
	me, err := identity.WhoAmI(ctx, r.Self)
	if err != nil {
		return err
	}
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: bs.Namespace,
			Name:      backupName(bs.Name, due),
			Labels:    map[string]string{movev1alpha1.BackupScheduleLabel: bs.Name},
		},
		Spec: *bs.Spec.Template.DeepCopy(),
	}
	creator.Annotate(mo, me.Username, me.Groups)
	mo.Annotations[movev1alpha1.ScheduledTimeAnnotation] = due.UTC().Format(time.RFC3339)
	if err := controllerutil.SetControllerReference(bs, mo, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, mo); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the backup %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	log.FromContext(ctx).Info("started a scheduled backup", "backup", mo.Name, "due", due)
	r.Recorder.Eventf(bs, mo, "Normal", "BackupStarted", "Backup", "started backup %s, due at %s", mo.Name, due.Format(time.RFC3339))
	return nil
}

// backupName is the name of a schedule's backup due at due: the schedule's
// name (cut to leave room) and the minute.
func backupName(schedule string, due time.Time) string {
	suffix := fmt.Sprintf("-%d", due.Unix()/60)
	return strings.TrimRight(schedule[:min(len(schedule), 253-len(suffix))], "-.") + suffix
}
