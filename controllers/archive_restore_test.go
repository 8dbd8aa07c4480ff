//go:build cluster

package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/internal/targetaccess"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// restoreSpec is a restore of the archive at location in the operator's
// archive directory, read with the key of Secret keys.
func restoreSpec(location, keys string) movev1alpha1.MoveOperationSpec {
	return movev1alpha1.MoveOperationSpec{Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
		Directory: &movev1alpha1.DirectoryStore{}, Location: location,
		IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: keys, Key: "identity"},
	}}}
}

// allowRestores gives the operator, in the cluster it runs in, the rights
// of a move's target, as docs/disaster-recovery.md says: the ClusterRole of
// dist/target-access.yaml bound to its ServiceAccount.
func allowRestores(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	root, err := testenv.RepositoryRoot("go test")
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, installed.TargetAccessPath))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := targetaccess.Grant(ctx, movetest.Env.Source.Config, manifest, targetaccess.Options{}); err != nil {
		t.Fatalf("applying the target's access in the source: %v", err)
	}
	id := movetest.OperatorIdentity
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "move-operator-restore-" + rand.String(4)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "move-operator-target"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: id.Namespace, Name: id.ServiceAccount}},
	}
	if err := movetest.Env.Source.Client.Create(ctx, crb); err != nil {
		t.Fatalf("binding the target's role to the operator: %v", err)
	}
	t.Cleanup(func() { _ = movetest.Env.Source.Client.Delete(context.Background(), crb) })
}

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

	movetest.StartOperator(t, movetest.OperatorOptions{Archives: controllers.Archives{Directory: t.TempDir(), SpoolDirectory: t.TempDir()}})
	ns := movetest.OpsNamespace(t)
	id, keys := backupKeys(t, ns)
	movetest.NewSecret(t, ns, "restore-key", map[string][]byte{"identity": []byte(id.String() + "\n")})
	backedUp := movetest.NewMoveOperation(t, ns, "backup", movev1alpha1.MoveOperationSpec{
		Target:     movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, RecipientsSecretRef: keys}},
		Namespaces: f.Namespaces,
	})
	backedUp, _ = movetest.WaitForPhase(t, backedUp, movev1alpha1.PhaseDone, 4*time.Minute)
	location := filepath.Base(backedUp.Status.Archive.Location)

	movetest.LoseFleet(t, f)

	t.Run("without a target's rights in its own cluster the operator refuses, naming them", func(t *testing.T) {
		g := NewWithT(t)
		mo := movetest.NewMoveOperation(t, ns, "restore-refused", restoreSpec(location, "restore-key"))
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
		mo := movetest.NewMoveOperation(t, ns, "restore-wrong-key", restoreSpec(location, "wrong-key"))
		failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonArchiveUnreadable))
		movetest.AssertNothingWritten(g, failed)
	})

	allowRestores(t)
	mo := movetest.NewMoveOperation(t, ns, "restore", restoreSpec(location, "restore-key"))
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
		again := movetest.NewMoveOperation(t, ns, "restore-again", restoreSpec(location, "restore-key"))
		failed, _ := movetest.WaitForPhase(t, again, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonTargetConflict))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(f.Clusters[0].Name))
		g.Expect(snapshot.Diff(snapshot.PausedOnce(before), snapshot.PausedOnce(snapshotOf(ctx, g, opts)))).To(BeEmpty())
	})
}

func snapshotOf(ctx context.Context, g Gomega, opts snapshot.Options) *snapshot.Snapshot {
	s, err := snapshot.Take(ctx, movetest.Env.Source.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	return s
}
