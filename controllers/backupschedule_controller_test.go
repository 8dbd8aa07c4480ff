package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/backupstore"
)

// scheduleAt is a schedule reconciler whose clock reads *now, over a fake
// cluster holding bs.
func scheduleAt(t *testing.T, now *time.Time, bs *movev1alpha1.BackupSchedule) (*BackupScheduleReconciler, *fakeCluster, *events.FakeRecorder) {
	t.Helper()
	f := newFakeCluster(t, movev1alpha1.ClusterSource, "source", &journal{}, bs)
	rec := events.NewFakeRecorder(100)
	// The archives end (below) records are in a directory that holds none:
	// removing one that is not there is no error.
	store := func(context.Context, *movev1alpha1.MoveOperation) (backupstore.Store, error) {
		return backupstore.Directory{Path: "/archives"}, nil
	}
	return &BackupScheduleReconciler{Client: f, Recorder: rec, Self: f, ArchiveStore: store, clock: func() time.Time { return *now }}, f, rec
}

func nightly(created time.Time) *movev1alpha1.BackupSchedule {
	return &movev1alpha1.BackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "nightly", UID: "schedule-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: movev1alpha1.BackupScheduleSpec{
			Schedule:                      "0 2 * * *",
			Template:                      movev1alpha1.MoveOperationSpec{Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, Unencrypted: true}}},
			SuccessfulBackupsHistoryLimit: ptr.To[int32](2), FailedBackupsHistoryLimit: ptr.To[int32](1), StartingDeadlineSeconds: ptr.To[int64](300),
		},
	}
}

func backupsOf(t *testing.T, c client.Client) []movev1alpha1.MoveOperation {
	t.Helper()
	list := &movev1alpha1.MoveOperationList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{movev1alpha1.BackupScheduleLabel: "nightly"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// end ends a backup as the MoveOperation reconciler would.
func end(t *testing.T, c client.Client, mo movev1alpha1.MoveOperation, phase movev1alpha1.MovePhase, at time.Time) {
	t.Helper()
	mo.Status.Phase = phase
	mo.Status.CompletionTime = ptr.To(metav1.NewTime(at))
	if phase == movev1alpha1.PhaseDone {
		mo.Status.Archive = &movev1alpha1.ArchiveStatus{Location: "/archives/" + mo.Name, Digest: "sha256:" + mo.Name}
	} else {
		mo.Status.FailureReason, mo.Status.FailureMessage = "CopyTimeout", "the registry went away"
	}
	// The fake holds MoveOperations without a status subresource.
	if err := c.Update(context.Background(), &mo); err != nil {
		t.Fatal(err)
	}
}

// A schedule takes a backup at each of its times, one at a time, as the
// operator (which the MoveOperation reconciler reads as the schedule's
// creator), owned by the schedule; it keeps the last ones, says which
// succeeded last, and reports what failed and what was missed.
func TestABackupScheduleTakesKeepsAndReportsItsBackups(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := created
	r, c, rec := scheduleAt(t, &now, nightly(created))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ops", Name: "nightly"}}
	reconcile := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	status := func() movev1alpha1.BackupScheduleStatus {
		bs := &movev1alpha1.BackupSchedule{}
		if err := c.Get(ctx, req.NamespacedName, bs); err != nil {
			t.Fatal(err)
		}
		return bs.Status
	}

	if res := reconcile(); res.RequeueAfter != 14*time.Hour {
		t.Errorf("before its first time the schedule waits until 02:00 (14h), not %s", res.RequeueAfter)
	}
	if n := len(backupsOf(t, c)); n != 0 {
		t.Fatalf("%d backups before the first time", n)
	}

	// 02:00:30 on the 2nd: the first backup.
	now = time.Date(2026, 12, 2, 2, 0, 30, 0, time.UTC)
	reconcile()
	reconcile() // a second look at the same time creates nothing more
	backups := backupsOf(t, c)
	if len(backups) != 1 {
		t.Fatalf("%d backups at the first time, want 1", len(backups))
	}
	first := backups[0]
	if owner := metav1.GetControllerOf(&first); owner == nil || owner.Name != "nightly" || owner.Kind != "BackupSchedule" {
		t.Errorf("the backup is not controlled by its schedule: %v", first.OwnerReferences)
	}
	if by := first.Annotations[movev1alpha1.CreatedByAnnotation]; by != operatorUsername {
		t.Errorf("the backup names %q as its creator, want the operator, which creates it", by)
	}
	if !first.Spec.Target.IsBackup() {
		t.Error("the backup's spec is not the template's")
	}
	if st := status(); st.Active != first.Name || st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("status after the first start: %+v", st)
	}

	// The next day's time comes while the first still runs: missed.
	now = time.Date(2026, 12, 3, 2, 0, 10, 0, time.UTC)
	reconcile()
	if n := len(backupsOf(t, c)); n != 1 {
		t.Errorf("%d backups while the first still runs, want 1", n)
	}
	if st := status(); st.Missed != 1 || !conditionIs(st.Conditions, movev1alpha1.ReadyCondition, metav1.ConditionFalse, movev1alpha1.ReasonBackupMissed) {
		t.Errorf("a backup not taken because the last still runs is missed: %+v", st)
	}
	expectEvent(t, rec, movev1alpha1.ReasonBackupMissed)

	// It ends; the next time takes one, which ends too.
	end(t, c, first, movev1alpha1.PhaseDone, now)
	now = time.Date(2026, 12, 4, 2, 1, 0, 0, time.UTC)
	reconcile()
	if st := status(); st.LastSuccessfulBackup == nil || st.LastSuccessfulBackup.Name != first.Name || st.LastSuccessfulBackup.Digest != "sha256:"+first.Name {
		t.Errorf("the last successful backup is not the first: %+v", st.LastSuccessfulBackup)
	}
	for _, mo := range backupsOf(t, c) {
		if mo.Name != first.Name {
			end(t, c, mo, movev1alpha1.PhaseDone, now.Add(time.Minute))
		}
	}
	reconcile()
	if st := status(); !conditionIs(st.Conditions, movev1alpha1.ReadyCondition, metav1.ConditionTrue, movev1alpha1.ReasonSucceeded) {
		t.Errorf("a backup succeeded after the miss: Ready, got %+v", st.Conditions)
	}

	// Two more days, each backup succeeding: only the last two are kept.
	for day := 5; day <= 6; day++ {
		now = time.Date(2026, 12, day, 2, 0, 5, 0, time.UTC)
		reconcile()
		for _, mo := range backupsOf(t, c) {
			if mo.Status.Phase == "" {
				end(t, c, mo, movev1alpha1.PhaseDone, now.Add(time.Minute))
			}
		}
		reconcile()
	}
	if n := len(backupsOf(t, c)); n != 2 {
		t.Errorf("%d backups kept, want the last 2 (successfulBackupsHistoryLimit)", n)
	}

	// One fails: Ready false, a Warning event, the backup kept.
	now = time.Date(2026, 12, 7, 2, 0, 5, 0, time.UTC)
	reconcile()
	for _, mo := range backupsOf(t, c) {
		if mo.Status.Phase == "" {
			end(t, c, mo, movev1alpha1.PhaseFailed, now.Add(time.Minute))
		}
	}
	reconcile()
	if st := status(); !conditionIs(st.Conditions, movev1alpha1.StalledCondition, metav1.ConditionTrue, movev1alpha1.ReasonBackupFailed) || st.LastFailedBackup == "" {
		t.Errorf("a failed backup: Stalled with BackupFailed, got %+v", st)
	}
	expectEvent(t, rec, movev1alpha1.ReasonBackupFailed)

	// The operator was down for two days: both times missed, past the
	// starting deadline, and nothing started late.
	before := len(backupsOf(t, c))
	now = time.Date(2026, 12, 9, 3, 0, 0, 0, time.UTC)
	reconcile()
	if n := len(backupsOf(t, c)); n != before {
		t.Errorf("a backup was started an hour late, past its starting deadline")
	}
	if st := status(); st.Missed != 3 {
		t.Errorf("missed %d in all, want 3", st.Missed)
	}
}

// A schedule that is not one is said so, and nothing is taken.
func TestAnInvalidScheduleIsSaidSo(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	bs := nightly(now.Add(-48 * time.Hour))
	bs.Spec.Schedule = "every night"
	r, c, _ := scheduleAt(t, &now, bs)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ops", Name: "nightly"}}); err != nil {
		t.Fatal(err)
	}
	got := &movev1alpha1.BackupSchedule{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(bs), got); err != nil {
		t.Fatal(err)
	}
	if !conditionIs(got.Status.Conditions, movev1alpha1.StalledCondition, metav1.ConditionTrue, movev1alpha1.ReasonInvalidSchedule) {
		t.Errorf("conditions: %+v", got.Status.Conditions)
	}
	if n := len(backupsOf(t, c)); n != 0 {
		t.Errorf("%d backups of an invalid schedule", n)
	}
}

func conditionIs(conds []metav1.Condition, t string, status metav1.ConditionStatus, reason string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == status && c.Reason == reason
		}
	}
	return false
}

func expectEvent(t *testing.T, rec *events.FakeRecorder, reason string) {
	t.Helper()
	for {
		select {
		case e := <-rec.Events:
			if contains(e, reason) {
				return
			}
		default:
			t.Errorf("no %s event", reason)
			return
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A MoveOperation that names the operator itself as its creator is held to
// the rights of the creator of the BackupSchedule that controls it, and
// refused when no schedule does: nobody borrows the operator's rights by
// writing its name.
func TestABackupTheOperatorCreatedIsHeldToItsSchedulesCreator(t *testing.T) {
	ctx := context.Background()
	f := newMoveFixture(t)
	f.mo.Annotations[movev1alpha1.CreatedByAnnotation] = operatorUsername

	obj, refused, err := f.r.creatorObject(ctx, newScope(f.mo))
	if err != nil {
		t.Fatal(err)
	}
	if refused == nil || refused.reason != movev1alpha1.ReasonCreatorUnknown || obj != nil {
		t.Fatalf("a MoveOperation that names the operator and belongs to no schedule: %v, %+v", obj, refused)
	}

	bs := nightly(time.Now())
	bs.Namespace = f.mo.Namespace
	bs.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: "alice"}
	if err := f.source.Create(ctx, bs); err != nil {
		t.Fatal(err)
	}
	f.mo.OwnerReferences = []metav1.OwnerReference{{APIVersion: movev1alpha1.GroupVersion.String(), Kind: "BackupSchedule", Name: bs.Name, UID: bs.UID, Controller: ptr.To(true)}}
	f.mo.Labels = map[string]string{movev1alpha1.BackupScheduleLabel: bs.Name}
	obj, refused, err = f.r.creatorObject(ctx, newScope(f.mo))
	if err != nil || refused != nil {
		t.Fatalf("a backup of a schedule: %v, %+v", err, refused)
	}
	if obj.GetAnnotations()[movev1alpha1.CreatedByAnnotation] != "alice" {
		t.Errorf("held to %v, want the schedule's creator", obj.GetAnnotations())
	}

	f.mo.OwnerReferences[0].UID = "another-schedule"
	if _, refused, _ = f.r.creatorObject(ctx, newScope(f.mo)); refused == nil {
		t.Error("a backup that names another schedule of that name was held to its creator")
	}

	f.mo.Annotations[movev1alpha1.CreatedByAnnotation] = theCreator
	if obj, refused, _ = f.r.creatorObject(ctx, newScope(f.mo)); refused != nil || obj != f.mo {
		t.Error("a MoveOperation its creator made is held to its own creator")
	}
}

// Pruning a backup that succeeded removes its archive from its store
// first (archiveReclaimPolicy Delete, the default), so that the store
// holds the archives of the backups kept; Retain leaves it. A backup whose
// archive cannot be removed is kept, with a Warning event, and backups go
// on being taken.
func TestASchedulePrunesTheArchivesOfTheBackupsItPrunes(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := created
	bs := nightly(created)
	bs.Spec.SuccessfulBackupsHistoryLimit = ptr.To[int32](1)
	r, c, rec := scheduleAt(t, &now, bs)
	dir := t.TempDir()
	r.ArchiveStore = func(context.Context, *movev1alpha1.MoveOperation) (backupstore.Store, error) {
		return backupstore.Directory{Path: dir}, nil
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ops", Name: "nightly"}}
	// day takes the backup of a day and ends it Done, its archive at
	// location (a file of dir when it is not an absolute path).
	day := func(d int, location string) string {
		t.Helper()
		now = time.Date(2026, 12, d, 2, 0, 5, 0, time.UTC)
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		for _, mo := range backupsOf(t, c) {
			if mo.Status.Phase != "" {
				continue
			}
			if !filepath.IsAbs(location) {
				location = filepath.Join(dir, location)
				if err := os.WriteFile(location, []byte("archive"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			end(t, c, mo, movev1alpha1.PhaseDone, now.Add(time.Minute))
			mo := mo
			if err := c.Get(ctx, client.ObjectKeyFromObject(&mo), &mo); err != nil {
				t.Fatal(err)
			}
			mo.Status.Archive.Location = location
			if err := c.Update(ctx, &mo); err != nil {
				t.Fatal(err)
			}
			return mo.Name
		}
		t.Fatalf("no backup taken on day %d", d)
		return ""
	}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() []string {
		var names []string
		for _, mo := range backupsOf(t, c) {
			names = append(names, mo.Name)
		}
		return names
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}

	day(2, "first")
	second := day(3, "second")
	reconcile()
	if names := kept(); len(names) != 1 || names[0] != second {
		t.Fatalf("kept %v, want the last backup alone", names)
	}
	if exists("first") || !exists("second") {
		t.Errorf("the pruned backup's archive is still in the store, or the kept one's is not: first %t, second %t", exists("first"), exists("second"))
	}

	// Retain: the MoveOperation goes, its archive stays.
	bs = &movev1alpha1.BackupSchedule{}
	if err := c.Get(ctx, req.NamespacedName, bs); err != nil {
		t.Fatal(err)
	}
	bs.Spec.ArchiveReclaimPolicy = movev1alpha1.ArchiveReclaimRetain
	if err := c.Update(ctx, bs); err != nil {
		t.Fatal(err)
	}
	third := day(4, "third")
	reconcile()
	if names := kept(); len(names) != 1 || names[0] != third {
		t.Fatalf("kept %v, want the last backup alone", names)
	}
	if !exists("second") {
		t.Error("with Retain, the pruned backup's archive was removed")
	}

	// Delete again, and an archive the store cannot remove (it is not
	// one of its own): the backup is kept, said so, and the next is taken.
	latest := &movev1alpha1.BackupSchedule{}
	if err := c.Get(ctx, req.NamespacedName, latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.ArchiveReclaimPolicy = movev1alpha1.ArchiveReclaimDelete
	if err := c.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(elsewhere, []byte("archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	mo := &movev1alpha1.MoveOperation{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ops", Name: third}, mo); err != nil {
		t.Fatal(err)
	}
	mo.Status.Archive.Location = elsewhere
	if err := c.Update(ctx, mo); err != nil {
		t.Fatal(err)
	}
	fifth := day(5, "fifth")
	reconcile()
	names := kept()
	if len(names) != 2 || !slices.Contains(names, third) || !slices.Contains(names, fifth) {
		t.Errorf("kept %v, want the backup whose archive could not be removed and the last one", names)
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("a file outside the archive directory was removed: %v", err)
	}
	expectEvent(t, rec, movev1alpha1.ReasonArchiveNotReclaimed)

	// Backups the schedule did not take: one that only carries its label,
	// and one handed to it (controlled by it) that the operator did not
	// create. Neither has its archive removed.
	for _, handed := range []bool{false, true} {
		name := fmt.Sprintf("not-taken-%t", handed)
		location := filepath.Join(dir, name)
		if err := os.WriteFile(location, []byte("archive"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The one handed to the schedule is its oldest (the first to
		// prune); the one labelled only, its newest (what its status would
		// name, were it counted).
		due := "2026-12-05T03:00:00Z"
		if handed {
			due = "2026-11-01T02:00:00Z"
		}
		mo := movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name,
			Labels:      map[string]string{movev1alpha1.BackupScheduleLabel: "nightly"},
			Annotations: map[string]string{movev1alpha1.CreatedByAnnotation: "mallory", movev1alpha1.ScheduledTimeAnnotation: due}}}
		if handed {
			if err := controllerutil.SetControllerReference(latest, &mo, c.Scheme()); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Create(ctx, &mo); err != nil {
			t.Fatal(err)
		}
		end(t, c, mo, movev1alpha1.PhaseDone, now)
		if err := c.Get(ctx, client.ObjectKeyFromObject(&mo), &mo); err != nil {
			t.Fatal(err)
		}
		mo.Status.Archive.Location = location
		if err := c.Update(ctx, &mo); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	if !exists("not-taken-false") || !exists("not-taken-true") {
		t.Errorf("the archive of a backup the schedule did not take was removed: labelled only %t, handed to it %t", exists("not-taken-false"), exists("not-taken-true"))
	}
	if names := kept(); !slices.Contains(names, "not-taken-false") || !slices.Contains(names, "not-taken-true") {
		t.Errorf("kept %v: a backup the schedule did not take is neither pruned nor deleted", names)
	}
	expectEvent(t, rec, movev1alpha1.ReasonArchiveNotReclaimed)
	latest = &movev1alpha1.BackupSchedule{}
	if err := c.Get(ctx, req.NamespacedName, latest); err != nil {
		t.Fatal(err)
	}
	if last := latest.Status.LastSuccessfulBackup; last == nil || last.Name != fifth {
		t.Errorf("the schedule's last successful backup is %+v, want %s: a MoveOperation carrying its label is not one of its backups", last, fifth)
	}
}
