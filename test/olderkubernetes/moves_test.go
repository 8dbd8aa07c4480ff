//go:build cluster

package olderkubernetes_test

import (
	"context"
	"testing"
	"time"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/registry"
	"github.com/move-operator/move-operator/test/testenv"
)

// runBound is how long a backup or a move of one small cluster may take
// here: seconds alone, a minute or two on a machine busy with other tests.
const runBound = 4 * time.Minute

// TestAMoveAndABackupByACreatorWhoNamesThemselvesRunToDone: on 1.33 the
// operator as installed (its binary, ServiceAccount and RBAC) backs up a
// fleet to a registry, then moves it to the target, each from a
// MoveOperation that a user with rights of her own created with the
// annotations that name her; once created, they cannot be changed.
func TestAMoveAndABackupByACreatorWhoNamesThemselvesRunToDone(t *testing.T) {
	op := startOperator(t)
	g := NewWithT(t)
	ctx := context.Background()
	prefix := "older" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{prefix + "-a"}, Name: prefix})
	reg, err := registry.Start(ctx, t.TempDir(), registry.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(reg.Stop)

	// Her rights: MoveOperations and Secrets where the operator takes
	// them (the target's credential, her backup key), everything in her
	// fleet's namespaces, and her fleet's cluster-scoped identity with its
	// credentials Secret, which go with her clusters.
	const user = "frank"
	bind(t, user, "ClusterRole", "move-operator-mover", op.Namespace())
	bind(t, user, "ClusterRole", "edit", op.Namespace())
	for _, ns := range f.Namespaces {
		grantAll(t, user, ns)
	}
	grantClusterWide(t, user, rbacv1.PolicyRule{
		APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"loopclusteridentities"}, Verbs: []string{"get"}})
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ProviderNamespace, Name: "read-credentials-" + prefix},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{f.Identities[0] + "-credentials"}}}})
	bind(t, user, "Role", "read-credentials-"+prefix, fleet.ProviderNamespace)
	key, err := age.GenerateX25519Identity()
	g.Expect(err).NotTo(HaveOccurred())
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: op.Namespace(), Name: "backup-keys"},
		Data: map[string][]byte{"recipients": []byte(key.Recipient().String())}})
	frank := as(t, user)
	herself := map[string]string{movev1alpha1.CreatedByAnnotation: user, movev1alpha1.CreatedByGroupsAnnotation: "system:authenticated"}

	// run creates her MoveOperation (once RBAC sees her bindings) and
	// follows it until it ends.
	run := func(name string, spec movev1alpha1.MoveOperationSpec) *movev1alpha1.MoveOperation {
		t.Helper()
		mo := moveOperation(op.Namespace(), herself, spec, f.Namespaces...)
		mo.GenerateName, mo.Name = "", name
		g.Eventually(func() error { return frank.Create(ctx, mo) }).WithTimeout(10*time.Second).Should(Succeed(), "the policy admits her %s", name)
		t.Cleanup(func() {
			if err := op.Delete(context.Background(), mo); err != nil {
				t.Errorf("deleting MoveOperation %s: %v", mo.Name, err)
			}
		})
		runCtx, cancel := context.WithTimeout(ctx, runBound)
		defer cancel()
		tl, ended, err := op.Follow(runCtx, nil, mo)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ended.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s: %s (the operator's log: %s)", name, ended.Status.FailureReason, ended.Status.FailureMessage, op.LogPath())
		g.Expect(movetest.KstatusOf(g, ended)).To(Equal(status.CurrentStatus))
		g.Expect(ended.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, user), "the creator she named")
		t.Logf("%s: Done in %s: %s", name, tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)
		return ended
	}

	repository := reg.Host + "/older/" + prefix
	backup := run("backup", movev1alpha1.MoveOperationSpec{Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
		OCI: &movev1alpha1.OCIStore{Repository: repository}, RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-keys", Key: "recipients"},
	}}})
	g.Expect(backup.Status.Archive).NotTo(BeNil())
	g.Expect(backup.Status.Archive.Location).To(HavePrefix(repository + "@sha256:"))
	g.Expect(backup.Status.Archive.Encrypted).To(BeTrue())
	g.Expect(backup.Status.Archive.Objects).To(BeNumerically(">", 0))
	g.Expect(clustersIn(ctx, g, movetest.Env.Source, f)).To(HaveLen(len(f.Clusters)), "a backup leaves the source as it was")

	moved := run("move", movev1alpha1.MoveOperationSpec{Target: op.Target()})
	g.Expect(clustersIn(ctx, g, movetest.Env.Target, f)).To(HaveLen(len(f.Clusters)), "the target holds her clusters")
	g.Expect(clustersIn(ctx, g, movetest.Env.Source, f)).To(BeEmpty(), "the source holds them no more")

	t.Run("the creator cannot be changed once it is written", func(t *testing.T) {
		g := NewWithT(t)
		mo := &movev1alpha1.MoveOperation{}
		g.Expect(frank.Get(ctx, client.ObjectKeyFromObject(moved), mo)).To(Succeed())
		patch := client.MergeFrom(mo.DeepCopy())
		mo.Annotations[movev1alpha1.CreatedByAnnotation] = "kubernetes-admin"
		refusedFor(g, frank.Patch(ctx, mo, patch), "cannot change")
	})
}

// clustersIn lists the names of the fleet's Clusters in one cluster.
func clustersIn(ctx context.Context, g Gomega, m *testenv.Management, f *fleet.Fleet) []string {
	var names []string
	for _, ns := range f.Namespaces {
		list := &clusterv1.ClusterList{}
		g.Expect(m.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for _, c := range list.Items {
			names = append(names, c.Namespace+"/"+c.Name)
		}
	}
	return names
}
