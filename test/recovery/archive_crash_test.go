//go:build cluster

package recovery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

// TestABackupAndItsRestoreFinishAfterACrashAtAnyWrite sweeps the writes of
// a backup and of the restore of its archive as the move's sweep does
// (see movetest.CrashSections): run j stops the operator before the j-th
// write of every section of the backup, then of the restore, each time
// resumed by a fresh operator. After the backup the source must be as it
// was (nothing deleted, nothing left paused, controllers back) and the
// archive stored once, whole, where the status says; after the fleet is
// lost and restored, the cluster must hold it as it was, statuses and
// owners included, Clusters unpaused, controllers back.
func TestABackupAndItsRestoreFinishAfterACrashAtAnyWrite(t *testing.T) {
	movetest.EnsureSetup(t)
	movetest.AllowRestores(t)
	began := time.Now()
	backups, restores := runArchiveCrashPoint(t, 0, nil, nil)
	runs := max(movetest.Longest(backups), movetest.Longest(restores))
	t.Logf("an uninterrupted backup made %d writes in %d sections, its restore %d in %d; %d runs crash before each",
		movetest.TotalWrites(backups), len(backups), movetest.TotalWrites(restores), len(restores), runs)
	reference := append(append([]movetest.SectionSize{}, backups...), restores...)
	movetest.SweepRuns(t, "backup and restore crash sweep", reference, began, func(t *testing.T, j int64) {
		runArchiveCrashPoint(t, j, backups, restores)
	})
}

// runArchiveCrashPoint backs up a fresh fleet, loses it and restores it,
// with operators that crash before the j-th write of every section (never,
// for j = 0), checks both results and returns the writes of each section
// of the backup and of the restore.
func runArchiveCrashPoint(t *testing.T, j int64, backupRef, restoreRef []movetest.SectionSize) (backups, restores []movetest.SectionSize) {
	g := NewWithT(t)
	within := movetest.RunBound(backupRef) + movetest.RunBound(restoreRef)
	ctx, cancel := context.WithTimeout(context.Background(), within+time.Minute)
	defer cancel()
	name := fmt.Sprintf("arch%d-%s", j, rand.String(3))
	// Every shape, without workers, which would only repeat kinds.
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	stateBefore := movetest.StateOf(ctx, g)
	opts := snapshot.Options{Namespaces: f.Namespaces, Status: true, IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation}}
	before, err := snapshot.Take(ctx, movetest.Env.Source.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	ops := movetest.OpsNamespace(t)
	_, recipients, identity := movetest.BackupKeys(t, ops)
	archives := controllers.Archives{Directory: t.TempDir(), SpoolDirectory: t.TempDir()}

	// The backup.
	sections := movetest.NewCrashSections(j, name, nil, backupRef)
	withArchives := sections.Options()
	withArchives.Archives = archives
	op := movetest.StartOperator(t, withArchives)
	backup := movetest.NewMoveOperation(t, ops, "backup", movetest.BackupSpec(recipients, f.Namespaces))
	resumer := movetest.StartResumer(t, op, withArchives)
	backup, _ = movetest.WaitForPhase(t, backup, movev1alpha1.PhaseDone, movetest.RunBound(backupRef))
	sections.LogCrashes(t)
	resumer.Stop()
	backups = sections.Sizes()

	g.Expect(backup.Status.Archive).NotTo(BeNil())
	stored, err := os.ReadDir(archives.Directory)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(HaveLen(1), "one archive, whole, whatever the crashes: %v", stored)
	g.Expect(stored[0].Name()).To(Equal(filepath.Base(backup.Status.Archive.Location)))
	afterBackup, err := snapshot.Take(ctx, movetest.Env.Source.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	if diff := snapshot.Diff(snapshot.PausedOnce(before), snapshot.PausedOnce(afterBackup)); diff != "" {
		t.Fatalf("the backup changed the source:\n%s", diff)
	}
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "controllers and webhooks must be as before the backup")

	// The cluster loses the fleet, and the restore brings it back.
	movetest.LoseFleet(t, f)
	sections = movetest.NewCrashSections(j, name, nil, restoreRef)
	withArchives = sections.Options()
	withArchives.Archives = archives
	op = movetest.StartOperator(t, withArchives)
	restore := movetest.NewMoveOperation(t, ops, "restore", movetest.RestoreSpec(backup.Status.Archive.Location, identity))
	resumer = movetest.StartResumer(t, op, withArchives)
	movetest.WaitForPhase(t, restore, movev1alpha1.PhaseDone, movetest.RunBound(restoreRef))
	sections.LogCrashes(t)
	restores = sections.Sizes()

	after, err := snapshot.Take(ctx, movetest.Env.Source.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	if diff := snapshot.Diff(snapshot.PausedOnce(before), snapshot.PausedOnce(after)); diff != "" {
		t.Fatalf("the restored fleet differs from the fleet backed up:\n%s", diff)
	}
	movetest.AssertOwnersExist(ctx, g, movetest.Env.Source.Client, f.Namespaces)
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "controllers and webhooks must be as before the restore")

	// Remove the MoveOperations while an operator still runs to release them.
	movetest.DeleteMoveOperation(t, restore)
	movetest.DeleteMoveOperation(t, backup)
	resumer.Stop()
	return backups, restores
}
