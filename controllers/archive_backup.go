package controllers

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backup"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/planner"
	"github.com/move-operator/move-operator/internal/remote"
)

// A backup is a MoveOperation whose target is an archive
// (spec.target.archive). It runs on the move's phase table, with the
// move's guarantees: Validating checks it before anything is written,
// Recording and ScalingDown stop the source's controllers as for a move
// (its pause, its bypass, block-move), Copying writes the archive in
// place of the target's copies, and RestoringSource brings the source back
// as after a move; a failure before that rolls back. It has no target
// cluster, so no phase acts on one (see clusters), and it deletes
// nothing: Copying leads to RestoringSource (routes, nextInBackup). The
// rows below are the sub-steps of the phases whose work differs.

func init() {
	recordingPhase.backupSteps = []subStep{
		// No target Secret to hold, and no GitOps manager to suspend: a
		// backup deletes nothing they would apply again.
		{name: "record the controllers", do: (*MoveOperationReconciler).recordControllers},
	}
	copyingPhase.backupSteps = []subStep{
		{name: "count the run", finished: func(mem *memo) bool { return !mem.copyStarted.IsZero() }, do: (*MoveOperationReconciler).startCopyRun},
		{name: "write the archive", finished: func(mem *memo) bool { return mem.archived != nil }, do: (*MoveOperationReconciler).writeArchive},
		// The archive is what the source held with every controller
		// stopped, or it is not kept: one that ran meanwhile may have
		// written in the middle of the read.
		{name: "check still stopped", do: (*MoveOperationReconciler).checkStillStopped},
		{name: "record the archive", do: (*MoveOperationReconciler).recordArchive},
	}
	restoringSourcePhase.backupSteps = []subStep{
		{name: "restore the source", do: func(r *MoveOperationReconciler, ctx context.Context, s *scope) (outcome, error) {
			o, err := r.restore(ctx, s, r.Source, movev1alpha1.ClusterSource, true, nil)
			if err == nil && o.isDone() {
				recordStoppedWindow(s.mo, time.Now())
			}
			return o, err
		}},
	}
	rollingBackPhase.backupSteps = []subStep{
		{name: sourceRestored, preamble: sourceBypass, once: true, do: (*MoveOperationReconciler).restoreSourceInRollback},
		{name: "discard the archive", do: (*MoveOperationReconciler).discardArchive},
	}
}

// archived is what a backup's run stored, until the status records it.
type archived struct {
	stored    backupstore.Stored
	objects   int
	encrypted bool
}

// writeArchive reads the source's selection as it is now, every
// controller stopped, and writes it to the store: planned as a move plans
// it, each group read with the copier's reads (backup.Write), streamed
// into the archive so that memory does not grow with the fleet. The
// creator is asked again about that plan, as before a move's copy. A run
// that dies before the status records the archive writes it again under
// the same name: what it left is removed first (a directory), or pushed
// over (a registry tag).
func (r *MoveOperationReconciler) writeArchive(ctx context.Context, s *scope) (outcome, error) {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	plan, err := r.buildPlan(ctx, mo)
	if err != nil {
		return outcome{}, err
	}
	if o, err := r.askCreatorAgain(ctx, s, plan); err != nil || !o.isDone() {
		return o, err
	}
	sel, err := planner.SelectionOf(mo.Spec)
	if err != nil {
		return outcome{}, err
	}
	sourceID, err := remote.ClusterID(ctx, r.Source)
	if err != nil {
		return outcome{}, fmt.Errorf("source cluster: %w", err)
	}
	enc, store, err := r.archiveSettings(ctx, mo)
	if err != nil {
		return outcome{}, err
	}
	name := archiveName(mo)
	if err := r.discardPartialArchive(store, name); err != nil {
		return outcome{}, err
	}
	about := backup.About{Selection: sel, Source: sourceID, PausedBy: string(mo.UID)}
	taken := time.Now()
	stored, err := store.Put(ctx, name, func(w io.Writer) error {
		// The index waits for Close in the spool directory, entry by entry,
		// not in memory.
		aw, err := archive.NewWriter(w, enc, taken, archive.SpoolIn(r.Archives.SpoolDirectory))
		if err != nil {
			return err
		}
		return backup.Write(ctx, r.Source, plan, aw, about)
	})
	if err != nil {
		deadline := lastCopyProgress(s, mem).Add(mo.Spec.Timeouts.CopyTimeout())
		return outcome{}, fmt.Errorf("writing the archive %s (the backup rolls back if it is not written by %s): %w", name, deadline.UTC().Format(time.RFC3339), err)
	}
	log.FromContext(ctx).Info("stored the archive", "location", stored.Location, "digest", stored.Digest, "bytes", stored.Size, "objects", plan.Len())
	mem.archived = &archived{stored: stored, objects: plan.Len(), encrypted: !enc.Unencrypted}
	progress := progressOf(mo, plan)
	setCopyProgress(progress, plan, len(plan.Groups))
	progress.LastProgressTime = ptrTime(time.Now())
	objectsCopied.Add(float64(plan.Len()))
	return done(), nil
}

// archiveSettings are the encryption and the store of a backup.
// Validating found both usable: a problem now means somebody changed the
// Secrets or the volume since, an error that the copy timeout bounds.
func (r *MoveOperationReconciler) archiveSettings(ctx context.Context, mo *movev1alpha1.MoveOperation) (archive.Encryption, backupstore.Store, error) {
	enc, finding, err := r.archiveEncryption(ctx, mo)
	if err != nil {
		return archive.Encryption{}, nil, err
	}
	if finding == nil {
		var store backupstore.Store
		if store, finding, err = r.archiveStore(ctx, mo); err != nil {
			return archive.Encryption{}, nil, err
		}
		if finding == nil {
			return enc, store, nil
		}
	}
	return archive.Encryption{}, nil, fmt.Errorf("%s (changed since the backup validated; it rolls back if this lasts spec.timeouts.copy)", finding.Message)
}

// recordArchive writes where the archive is in the status, once the
// controllers are known to have stayed stopped while it was read.
func (r *MoveOperationReconciler) recordArchive(_ context.Context, s *scope) (outcome, error) {
	a := r.memoOf(s.mo.UID).archived
	s.mo.Status.Archive = &movev1alpha1.ArchiveStatus{
		Location: a.stored.Location, Digest: a.stored.Digest, Size: a.stored.Size,
		Objects: int32(a.objects), Encrypted: a.encrypted, StoredTime: ptrTime(time.Now()),
	}
	return done(), nil
}

// discardArchive removes, in a backup's rollback, an archive the failed
// run stored but the status does not record (read while a controller ran
// again, or stored just before a crash): from a directory it is deleted,
// by its name, which only this backup writes, so that a rollback after a
// restart deletes it too; a registry tag is left, and a Warning event says
// so, since a registry may refuse deletions.
func (r *MoveOperationReconciler) discardArchive(ctx context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	if s.mo.Status.Archive != nil {
		return done(), nil // recorded: whole, and read with every controller stopped
	}
	store, finding, err := r.archiveStore(ctx, s.mo)
	if err != nil {
		return outcome{}, err
	}
	if _, isDir := store.(backupstore.Directory); finding == nil && isDir {
		if err := r.discardPartialArchive(store, archiveName(s.mo)); err != nil {
			return outcome{}, err
		}
	} else if mem.archived != nil {
		msg := fmt.Sprintf("the backup failed after it stored %s, which is not to be restored: delete it from the registry", mem.archived.stored.Location)
		r.event(s.mo, "Warning", movev1alpha1.ReasonFailed, string(movev1alpha1.PhaseRollingBack), msg)
	}
	mem.archived = nil
	return done(), nil
}

// recordStoppedWindow says in the status how long the backup kept the
// source's providers stopped: from ScalingDown to the end of
// RestoringSource, when they are Available again.
func recordStoppedWindow(mo *movev1alpha1.MoveOperation, now time.Time) {
	if mo.Status.Archive == nil {
		return
	}
	for _, t := range mo.Status.PhaseTransitions {
		if t.Phase == movev1alpha1.PhaseScalingDown {
			mo.Status.Archive.ControllersStoppedFor = &metav1.Duration{Duration: now.Sub(t.Time.Time).Round(time.Second)}
			return
		}
	}
}

// creatorObject is the object whose creator a MoveOperation is held to:
// its own, or, for a backup the operator created for a BackupSchedule (its
// creator annotations name the operator itself), the schedule that owns
// it, whose creator the admission policy vouched for. A MoveOperation
// that names the operator as its creator and belongs to no schedule is
// refused: only the operator's schedules create MoveOperations as the
// operator, and nobody may borrow its rights.
func (r *MoveOperationReconciler) creatorObject(ctx context.Context, s *scope) (metav1.Object, *outcome, error) {
	mo := s.mo
	user, err := creator.Of(mo)
	if err != nil {
		return mo, nil, nil // the creator checks say so
	}
	me, err := r.whoAmI(ctx, s, r.Source)
	if err != nil {
		return nil, nil, err
	}
	if user.Name != me.Username {
		return mo, nil, nil
	}
	refuse := func(why string) (metav1.Object, *outcome, error) {
		o := failWith(movev1alpha1.ReasonCreatorUnknown, fmt.Sprintf(
			"the MoveOperation names the operator's own identity (%s) as its creator, %s: only the operator's BackupSchedules create MoveOperations as the operator; create it as yourself", me.Username, why))
		return nil, &o, nil
	}
	owner := metav1.GetControllerOf(mo)
	if owner == nil || owner.Kind != "BackupSchedule" || owner.APIVersion != movev1alpha1.GroupVersion.String() || mo.Labels[movev1alpha1.BackupScheduleLabel] != owner.Name {
		return refuse("and no BackupSchedule of its namespace controls it")
	}
	bs := &movev1alpha1.BackupSchedule{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: mo.Namespace, Name: owner.Name}, bs); err != nil {
		if apierrors.IsNotFound(err) {
			return refuse("and its BackupSchedule " + owner.Name + " is gone")
		}
		return nil, nil, fmt.Errorf("reading BackupSchedule %s/%s: %w", mo.Namespace, owner.Name, err)
	}
	if bs.UID != owner.UID {
		return refuse("and the BackupSchedule " + owner.Name + " it names is another one")
	}
	return bs, nil, nil
}
