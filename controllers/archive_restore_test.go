//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

// TestARestoreBringsTheFleetBackIntoAClusterThatLostIt: a fleet backed up
// by a MoveOperation, then lost from the cluster, comes back with a
// MoveOperation whose source is the archive: every object, its status and
// its owners as they were (the Clusters' observed generations aside, see
// snapshot.PausedOnce), Clusters unpaused. Before the operator is given
// the rights of a target there, the restore is refused naming them, with
// nothing written; a second restore of the same archive is refused naming
// what is in its way.
func TestARestoreBringsTheFleetBackIntoAClusterThatLostIt(t *testing.T) {
	movetest.EnsureSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	prefix := "restore-" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	opts := snapshot.Options{Namespaces: f.Namespaces, Status: true, IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation}}
	before, err := snapshot.Take(ctx, movetest.Env.Source.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())

	archives := t.TempDir()
	movetest.StartOperator(t, movetest.OperatorOptions{Archives: controllers.Archives{Directory: archives, SpoolDirectory: t.TempDir()}})
	ns := movetest.OpsNamespace(t)
	id, keys, key := movetest.BackupKeys(t, ns)
	backedUp := movetest.NewMoveOperation(t, ns, "backup", movetest.BackupSpec(keys, f.Namespaces))
	backedUp, _ = movetest.WaitForPhase(t, backedUp, movev1alpha1.PhaseDone, 4*time.Minute)
	location := backedUp.Status.Archive.Location

	movetest.LoseFleet(t, f)

	t.Run("without a target's rights in its own cluster the operator refuses, naming them", func(t *testing.T) {
		g := NewWithT(t)
		mo := movetest.NewMoveOperation(t, ns, "restore-refused", movetest.RestoreSpec(location, key))
		failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonAccessDenied))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring("--clusterrole=move-operator-target"))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring("create"))
		movetest.AssertNothingWritten(g, failed)
		g.Expect(snapshotOf(ctx, g, opts).Objects).To(BeEmpty(), "nothing of the fleet may be written")
	})

	t.Run("a wrong key is refused before anything stops", func(t *testing.T) {
		g := NewWithT(t)
		other, err := age.GenerateX25519Identity()
		g.Expect(err).NotTo(HaveOccurred())
		movetest.NewSecret(t, ns, "wrong-key", map[string][]byte{"identity": []byte(other.String())})
		mo := movetest.NewMoveOperation(t, ns, "restore-wrong-key", movetest.RestoreSpec(location, &movev1alpha1.SecretKeyReference{Name: "wrong-key", Key: "identity"}))
		failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonArchiveUnreadable))
		movetest.AssertNothingWritten(g, failed)
	})

	movetest.AllowRestores(t)

	t.Run("a creator who may not create what the archive holds is refused, and shown nothing of it", func(t *testing.T) {
		g := NewWithT(t)
		user := "restorer-" + rand.String(4)
		grant(t, user, ns, "move-operator-mover")
		grant(t, user, ns, "edit") // the key's Secret
		// What the admission policy asks of spec.namespaces (a restore's
		// creator may create Secrets and Clusters there), every other
		// verb, and nothing else that creates the fleet: the operator,
		// asking over the archive's plan, finds the kinds she may not
		// create.
		grant(t, user, "", user+"-all-but-create",
			rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters"}, Verbs: []string{"create"}})
		spec := movetest.RestoreSpec(location, key)
		spec.Namespaces = f.Namespaces
		mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restore-not-hers"}, Spec: spec}
		g.Eventually(func() error { return impersonate(t, user).Create(ctx, mo) }).WithTimeout(10*time.Second).Should(Succeed(), "the policy admits a restore whose key she may read")
		t.Cleanup(func() { movetest.DeleteMoveOperation(t, mo) })
		failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonCreatorNotAllowed))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("%q may not create", user)))
		g.Expect(failed.Status.Plan).To(BeNil(), "a creator refused is not shown what the archive holds")
		movetest.AssertNothingWritten(g, failed)
		g.Expect(snapshotOf(ctx, g, opts).Objects).To(BeEmpty(), "nothing of the fleet may be written")
	})

	mo := movetest.NewMoveOperation(t, ns, "restore", movetest.RestoreSpec(location, key))
	done, seen := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)

	t.Run("it went through the move's phases but those of a source cluster", func(t *testing.T) {
		g := NewWithT(t)
		var phases []movev1alpha1.MovePhase
		for _, tr := range done.Status.PhaseTransitions {
			phases = append(phases, tr.Phase)
		}
		g.Expect(phases).To(Equal(controllers.PathOf(done)))
		g.Expect(phases).NotTo(ContainElements(movev1alpha1.PhaseDeleting, movev1alpha1.PhaseRestoringSource))
		g.Expect(seen).To(HaveKey(status.InProgressStatus))
		g.Expect(movetest.KstatusOf(g, done)).To(Equal(status.CurrentStatus))
		g.Expect(done.Status.Progress.Copied).To(Equal(int32(len(before.Objects))))
		for _, c := range done.Status.Controllers {
			g.Expect(c.Cluster).To(Equal(movev1alpha1.ClusterTarget), "the cluster restored into is the restore's target")
		}
	})

	t.Run("the fleet is back as it was, statuses and owners included, unpaused", func(t *testing.T) {
		g := NewWithT(t)
		after := snapshotOf(ctx, g, opts)
		g.Expect(snapshot.Diff(snapshot.PausedOnce(before), snapshot.PausedOnce(after))).To(BeEmpty())
		for _, o := range after.Objects {
			g.Expect(o.Unresolved).To(BeEmpty(), "%s names owners that do not exist", o.Key())
		}
		movetest.AssertOwnersExist(ctx, g, movetest.Env.Source.Client, f.Namespaces)
		movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
	})

	t.Run("a second restore of the archive names what is in its way and writes nothing", func(t *testing.T) {
		g := NewWithT(t)
		again := movetest.NewMoveOperation(t, ns, "restore-again", movetest.RestoreSpec(location, key))
		failed, _ := movetest.WaitForPhase(t, again, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonTargetConflict))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(f.Clusters[0].Name))
		g.Expect(snapshot.Diff(snapshot.PausedOnce(before), snapshot.PausedOnce(snapshotOf(ctx, g, opts)))).To(BeEmpty())
	})

	t.Run("a directory as clusterctl move --to-directory writes it is restored too, its Clusters resumed", func(t *testing.T) {
		g := NewWithT(t)
		movetest.LoseFleet(t, f)
		// clusterctl's layout: one file per object, no index, in the clear.
		a := readArchive(t, backedUp.Status.Archive.Location, id)
		unpacked := filepath.Join(t.TempDir(), "unpacked")
		g.Expect(archive.Unpack(a, unpacked)).To(Succeed())
		dir := filepath.Join(archives, "from-clusterctl")
		g.Expect(os.Rename(filepath.Join(unpacked, "objects"), dir)).To(Succeed())
		// clusterctl pauses what it writes without saying who paused it.
		files, err := os.ReadDir(dir)
		g.Expect(err).NotTo(HaveOccurred())
		for _, file := range files {
			path := filepath.Join(dir, file.Name())
			data, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			g.Expect(u.UnmarshalJSON(data)).To(Succeed())
			annotations := u.GetAnnotations()
			delete(annotations, movev1alpha1.PausedByAnnotation)
			u.SetAnnotations(annotations)
			data, err = u.MarshalJSON()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
		}
		mo := movetest.NewMoveOperation(t, ns, "restore-clusterctl", movev1alpha1.MoveOperationSpec{Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
			Directory: &movev1alpha1.DirectoryStore{}, Location: "from-clusterctl"}}})
		movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)
		after := snapshotOf(ctx, g, opts)
		g.Expect(after.Objects).To(HaveLen(len(before.Objects)))
		movetest.AssertOwnersExist(ctx, g, movetest.Env.Source.Client, f.Namespaces)
		movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
	})
}

func snapshotOf(ctx context.Context, g Gomega, opts snapshot.Options) *snapshot.Snapshot {
	s, err := snapshot.Take(ctx, movetest.Env.Source.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	return s
}
