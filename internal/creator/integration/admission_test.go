//go:build cluster

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/test/testenv"
)

// tenancy is the setup of these tests: a tenant's own namespace (where her
// MoveOperations and the target's Secret live), a namespace of her fleet,
// and another team's.
type tenancy struct {
	tenant, own, other string
}

func newTenancy(t *testing.T) tenancy {
	t.Helper()
	ensureInstalled(t)
	return tenancy{
		tenant: testenv.NewNamespace(t, env.Source, "tenant-a"),
		own:    testenv.NewNamespace(t, env.Source, "team-a"),
		other:  testenv.NewNamespace(t, env.Source, "team-b"),
	}
}

// bind gives user a ClusterRole in one namespace, as an administrator does
// with a RoleBinding.
func bind(t *testing.T, user, clusterRole, namespace string) {
	t.Helper()
	bindRole(t, user, namespace, "ClusterRole", clusterRole)
}

// bindRole binds user to a Role or ClusterRole in one namespace.
func bindRole(t *testing.T, user, namespace, kind, name string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "test-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	NewWithT(t).Expect(admin(t).Create(context.Background(), rb)).To(Succeed())
}

// grantAll gives user every right in one namespace: her fleet's.
func grantAll(t *testing.T, user, namespace string) {
	t.Helper()
	grant(t, user, namespace, "everything-"+user, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
}

// grant gives user the rules in one namespace, with a Role of that name.
func grant(t *testing.T, user, namespace, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules}
	NewWithT(t).Expect(admin(t).Create(context.Background(), role)).To(Succeed())
	bindRole(t, user, namespace, "Role", name)
}

// mover is bob, a user bound to the movers' role in the tenant's
// namespace, with edit there (the target's Secret is his) and every right
// in the fleet's namespace only; RBAC is given a moment to see the bindings.
func (tn tenancy) mover(t *testing.T) client.Client {
	t.Helper()
	const name = "bob"
	bind(t, name, "move-operator-mover", tn.tenant)
	bind(t, name, "edit", tn.tenant)
	grantAll(t, name, tn.own)
	c := as(t, name)
	NewWithT(t).Eventually(func() error {
		return c.List(context.Background(), &movev1alpha1.MoveOperationList{}, client.InNamespace(tn.tenant))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	return c
}

func (tn tenancy) moveOperation(namespaces ...string) *movev1alpha1.MoveOperation {
	return &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.tenant, GenerateName: "move-"},
		Spec: movev1alpha1.MoveOperationSpec{
			Target:     movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: "target-kubeconfig"}},
			Namespaces: namespaces,
		},
	}
}

func dryRun(c client.Client, mo *movev1alpha1.MoveOperation) error {
	return c.Create(context.Background(), mo, client.DryRunAll)
}

// refusedFor expects the API server to refuse a create with a message
// that holds every one of wants.
func refusedFor(g Gomega, err error, wants ...string) {
	g.Expect(err).To(HaveOccurred(), "the API server admitted it")
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "refused as forbidden: %v", err)
	for _, w := range wants {
		g.Expect(err.Error()).To(ContainSubstring(w))
	}
}

func TestANamespaceEditorMayNotCreateAMoveOperation(t *testing.T) {
	tn := newTenancy(t)
	bind(t, "alice", "edit", tn.tenant)
	alice := as(t, "alice")
	g := NewWithT(t)
	g.Eventually(func() error {
		return alice.List(context.Background(), &corev1.SecretList{}, client.InNamespace(tn.tenant))
	}).WithTimeout(10*time.Second).Should(Succeed(), "alice edits her namespace")

	err := alice.Create(context.Background(), tn.moveOperation(tn.tenant))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "edit grants no MoveOperations: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`cannot create resource "moveoperations"`), "refused by RBAC, before any policy")
}

func TestAMoverMayMoveOnlyNamespacesWhoseSecretsAndClustersAreHers(t *testing.T) {
	tn := newTenancy(t)
	bob := tn.mover(t)

	t.Run("her own namespace is admitted, and the API server writes who she is", func(t *testing.T) {
		g := NewWithT(t)
		mo := tn.moveOperation(tn.own)
		g.Expect(dryRun(bob, mo)).To(Succeed())
		g.Expect(mo.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, "bob"))
		g.Expect(strings.Split(mo.Annotations[movev1alpha1.CreatedByGroupsAnnotation], ",")).To(ContainElement("system:authenticated"))
	})
	t.Run("another team's namespace is refused naming the first missing right", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(bob, tn.moveOperation(tn.own, tn.other)),
			`bob may not get secrets in namespace `+tn.other, "spec.namespaces names")
	})
	t.Run("every namespace is refused: that needs the rights at the cluster scope", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(bob, tn.moveOperation()), "bob may not get secrets at the cluster scope")
	})
	t.Run("more namespaces than the policy asks about one by one need the rights everywhere", func(t *testing.T) {
		many := []string{tn.own}
		for i := range creator.NamespaceSlots {
			many = append(many, tn.own+"-"+string(rune('a'+i)))
		}
		refusedFor(NewWithT(t), dryRun(bob, tn.moveOperation(many...)), "more than 6 namespaces")
	})
	t.Run("suspending GitOps managers needs the right to patch them wherever they are", func(t *testing.T) {
		mo := tn.moveOperation(tn.own)
		mo.Spec.GitOps = movev1alpha1.GitOpsSuspend
		refusedFor(NewWithT(t), dryRun(bob, mo), "bob may not patch kustomizations.kustomize.toolkit.fluxcd.io")
	})
	t.Run("a target Secret the creator may not read is refused", func(t *testing.T) {
		// carol may create MoveOperations in team-b and move team-a, but
		// may not read team-b's Secrets.
		bind(t, "carol", "move-operator-mover", tn.other)
		grantAll(t, "carol", tn.own)
		carol := as(t, "carol")
		mo := tn.moveOperation(tn.own)
		mo.Namespace = tn.other
		NewWithT(t).Eventually(func() error { return dryRun(carol, mo) }).WithTimeout(10 * time.Second).Should(
			MatchError(ContainSubstring("carol may not get secret target-kubeconfig in namespace " + tn.other)))
	})
}

func TestAControllerTheCreatorMayNotScaleIsRefused(t *testing.T) {
	tn := newTenancy(t)
	bob := tn.mover(t)
	g := NewWithT(t)
	mo := tn.moveOperation(tn.own)
	mo.Spec.Controllers.Additional = []movev1alpha1.AdditionalController{{Namespace: "kube-system", Name: "coredns"}}
	refusedFor(g, dryRun(bob, mo), "bob may not patch deployment kube-system/coredns in the source")

	mo = tn.moveOperation(tn.own)
	mo.Spec.Controllers.Additional = []movev1alpha1.AdditionalController{{Namespace: tn.own, Name: "her-manager"}}
	g.Expect(dryRun(bob, mo)).To(Succeed(), "a Deployment of her own namespace is hers to scale")

	mo = tn.moveOperation(tn.own)
	mo.Spec.Controllers.Additional = []movev1alpha1.AdditionalController{{Cluster: movev1alpha1.ControllerInTarget, Namespace: "kube-system", Name: "coredns"}}
	g.Expect(dryRun(bob, mo)).To(Succeed(), "the target's Deployments are scaled with the target's credential, which the Secret she may read holds")

	mo = tn.moveOperation(tn.own)
	mo.Spec.Controllers.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}
	refusedFor(g, dryRun(bob, mo), "bob may not patch deployments.apps at the cluster scope", "spec.controllers.selector")

	mo = tn.moveOperation(tn.own)
	mo.Spec.Controllers.Selector = movev1alpha1.DefaultControllerSelector()
	g.Expect(dryRun(bob, mo)).To(Succeed(), "the providers, which every move stops, are no choice of hers")
}

func TestTheCreatorCannotBeForgedNorChanged(t *testing.T) {
	tn := newTenancy(t)
	bob := tn.mover(t)
	g := NewWithT(t)
	ctx := context.Background()

	mo := tn.moveOperation(tn.own)
	mo.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: "kubernetes-admin", movev1alpha1.CreatedByGroupsAnnotation: "system:masters"}
	g.Expect(bob.Create(ctx, mo)).To(Succeed())
	t.Cleanup(func() { _ = admin(t).Delete(context.Background(), mo) })
	g.Expect(mo.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, "bob"), "the API server writes who made the request over what it said")
	g.Expect(mo.Annotations[movev1alpha1.CreatedByGroupsAnnotation]).NotTo(ContainSubstring("system:masters"))

	patch := client.MergeFrom(mo.DeepCopy())
	mo.Annotations[movev1alpha1.CreatedByAnnotation] = "kubernetes-admin"
	_ = bob.Patch(ctx, mo, patch)
	got := &movev1alpha1.MoveOperation{}
	g.Expect(admin(t).Get(ctx, client.ObjectKeyFromObject(mo), got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, "bob"), "the creator does not change after creation")
}

// On Kubernetes 1.30 to 1.35 there is no MutatingAdmissionPolicy: the
// creator writes the annotations, and the validating policy admits only
// the truth, telling them what to write.
func TestWithoutTheMutatingPolicyTheCreatorWritesWhoTheyAreAndOnlyThat(t *testing.T) {
	tn := newTenancy(t)
	bob := tn.mover(t)
	g := NewWithT(t)
	ctx := context.Background()
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	key := client.ObjectKey{Name: creator.InstallerPrefix + creator.MutatingPolicyBaseName}
	g.Expect(admin(t).Get(ctx, key, binding)).To(Succeed())
	g.Expect(admin(t).Delete(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		binding.ResourceVersion = ""
		if err := admin(t).Create(context.Background(), binding); err != nil {
			t.Errorf("putting the mutating policy's binding back: %v", err)
		}
		// The next test needs it in force again: the API server loads it
		// a moment after it is written.
		NewWithT(t).Eventually(func() map[string]string {
			mo := tn.moveOperation(tn.own)
			_ = dryRun(admin(t), mo)
			return mo.Annotations
		}).WithTimeout(30*time.Second).Should(HaveKey(movev1alpha1.CreatedByAnnotation), "the mutating policy applies again")
	})

	g.Eventually(func() error { return dryRun(bob, tn.moveOperation(tn.own)) }).WithTimeout(20*time.Second).Should(
		MatchError(ContainSubstring(`set the annotation move.cluster.x-k8s.io/created-by to "bob"`)), "the message says what to write")

	forged := tn.moveOperation(tn.own)
	forged.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: "kubernetes-admin", movev1alpha1.CreatedByGroupsAnnotation: "system:masters,system:authenticated"}
	refusedFor(g, dryRun(bob, forged), "created-by")

	honest := tn.moveOperation(tn.own)
	honest.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: "bob", movev1alpha1.CreatedByGroupsAnnotation: "system:authenticated"}
	g.Expect(dryRun(bob, honest)).To(Succeed())
}

// CEL allows each expression two authorization checks and each request
// about 28: the most a MoveOperation can make the policy ask must fit,
// or a cluster administrator's largest move would be refused for cost.
func TestTheLargestSpecAnAdministratorWritesFitsTheAuthorizationBudget(t *testing.T) {
	tn := newTenancy(t)
	mo := tn.moveOperation()
	for i := range creator.NamespaceSlots {
		mo.Spec.Namespaces = append(mo.Spec.Namespaces, tn.own+"-"+string(rune('a'+i)))
	}
	for i := range creator.ControllerSlots {
		mo.Spec.Controllers.Additional = append(mo.Spec.Controllers.Additional,
			movev1alpha1.AdditionalController{Namespace: tn.own, Name: "manager-" + string(rune('a'+i))})
	}
	mo.Spec.GitOps = movev1alpha1.GitOpsSuspend
	mo.Spec.Controllers.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "control"}}
	g := NewWithT(t)
	g.Expect(dryRun(admin(t), mo)).To(Succeed(), "every check runs and passes within the budget")

	mo.Spec.Namespaces = append(mo.Spec.Namespaces, tn.other)
	mo.Spec.Controllers.Additional = append(mo.Spec.Controllers.Additional, movev1alpha1.AdditionalController{Namespace: tn.other, Name: "manager"})
	g.Expect(dryRun(admin(t), mo)).To(Succeed(), "past the slots the checks are cluster-wide, which an administrator passes")
}

// A backup reads what a move reads (every Secret of its namespaces): the
// same rights are asked of its creator, and instead of the target's
// kubeconfig, the Secrets of its keys and registry credentials, by name.
func TestABackupAsksWhatAMoveAsksAndItsSecretsByName(t *testing.T) {
	tn := newTenancy(t)
	bob := tn.mover(t)
	backup := func(namespaces ...string) *movev1alpha1.MoveOperation {
		mo := tn.moveOperation(namespaces...)
		mo.Spec.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
			OCI:                 &movev1alpha1.OCIStore{Repository: "registry.example.com/backups", CredentialsSecretRef: &movev1alpha1.LocalSecretReference{Name: "registry"}},
			RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-keys"},
		}}
		return mo
	}
	t.Run("his own namespace is admitted", func(t *testing.T) {
		NewWithT(t).Expect(dryRun(bob, backup(tn.own))).To(Succeed())
	})
	t.Run("another team's namespace is refused: its Secrets would be in the archive", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(bob, backup(tn.own, tn.other)), `bob may not get secrets in namespace `+tn.other)
	})
	t.Run("keys and credentials the creator may not read are refused by name", func(t *testing.T) {
		bind(t, "dave", "move-operator-mover", tn.other)
		grantAll(t, "dave", tn.own)
		dave := as(t, "dave")
		mo := backup(tn.own)
		mo.Namespace = tn.other
		NewWithT(t).Eventually(func() error { return dryRun(dave, mo) }).WithTimeout(10 * time.Second).Should(
			MatchError(ContainSubstring("dave may not get secret backup-keys in namespace " + tn.other + ", which spec.target.archive.recipientsSecretRef names")))
		mo = backup(tn.own)
		mo.Namespace = tn.other
		mo.Spec.Target.Archive.RecipientsSecretRef, mo.Spec.Target.Archive.Unencrypted = nil, true
		NewWithT(t).Expect(dryRun(dave, mo)).To(MatchError(ContainSubstring("dave may not get secret registry in namespace " + tn.other + ", which spec.target.archive.oci.credentialsSecretRef names")))
	})
}

// A BackupSchedule takes backups on its creator's behalf for as long as it
// lives: the same policy names its creator and asks them, at its creation,
// what a backup of its template asks.
func TestABackupScheduleIsCheckedAsTheBackupsItTakes(t *testing.T) {
	tn := newTenancy(t)
	bob := tn.mover(t)
	schedule := func(namespaces ...string) *movev1alpha1.BackupSchedule {
		return &movev1alpha1.BackupSchedule{
			ObjectMeta: metav1.ObjectMeta{Namespace: tn.tenant, GenerateName: "nightly-"},
			Spec: movev1alpha1.BackupScheduleSpec{Schedule: "0 2 * * *", Template: movev1alpha1.MoveOperationSpec{
				Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
					OCI:                 &movev1alpha1.OCIStore{Repository: "registry.example.com/backups"},
					RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-keys"},
				}},
				Namespaces: namespaces,
			}},
		}
	}
	t.Run("his own namespace is admitted, and the API server writes who he is", func(t *testing.T) {
		g := NewWithT(t)
		bs := schedule(tn.own)
		g.Eventually(func() error { return bob.Create(context.Background(), bs, client.DryRunAll) }).WithTimeout(10 * time.Second).Should(Succeed())
		g.Expect(bs.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, "bob"))
	})
	t.Run("another team's namespace is refused", func(t *testing.T) {
		refusedFor(NewWithT(t), bob.Create(context.Background(), schedule(tn.own, tn.other), client.DryRunAll), `bob may not get secrets in namespace `+tn.other)
	})
	t.Run("every namespace needs the rights at the cluster scope", func(t *testing.T) {
		refusedFor(NewWithT(t), bob.Create(context.Background(), schedule(), client.DryRunAll), "bob may not get secrets at the cluster scope")
	})
	t.Run("a creator named by hand must be the requester", func(t *testing.T) {
		bs := schedule(tn.own)
		bs.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: "admin"}
		err := bob.Create(context.Background(), bs, client.DryRunAll)
		if err == nil {
			// With the MutatingAdmissionPolicy the API server wrote the
			// real requester over the forged one.
			NewWithT(t).Expect(bs.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, "bob"))
		}
	})
}

// A restore writes the archive's objects into the cluster it runs in: its
// creator is asked to create Secrets and Clusters in each namespace it
// names, not to read or delete what is there (a new management cluster
// holds nothing yet), and to read the key's Secret by name.
func TestARestoreAsksToCreateWhatItWrites(t *testing.T) {
	tn := newTenancy(t)
	const name = "erin"
	bind(t, name, "move-operator-mover", tn.tenant)
	bind(t, name, "view", tn.tenant)
	grant(t, name, tn.own, "restorer-"+name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters"}, Verbs: []string{"create"}})
	grant(t, name, tn.tenant, "backup-key-"+name,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"backup-key"}, Verbs: []string{"get"}})
	erin := as(t, name)
	restore := func(key string, namespaces ...string) *movev1alpha1.MoveOperation {
		return &movev1alpha1.MoveOperation{
			ObjectMeta: metav1.ObjectMeta{Namespace: tn.tenant, GenerateName: "restore-"},
			Spec: movev1alpha1.MoveOperationSpec{
				Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
					Directory: &movev1alpha1.DirectoryStore{}, Location: "backup-1",
					IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: key},
				}},
				Namespaces: namespaces,
			},
		}
	}

	t.Run("a namespace she may create Secrets and Clusters in is admitted", func(t *testing.T) {
		NewWithT(t).Eventually(func() error { return dryRun(erin, restore("backup-key", tn.own)) }).WithTimeout(10 * time.Second).Should(Succeed())
	})
	t.Run("a move of the same namespace is refused: she may not read what it sends", func(t *testing.T) {
		mo := tn.moveOperation(tn.own)
		mo.Spec.Target.KubeconfigSecretRef.Name = "backup-key"
		refusedFor(NewWithT(t), dryRun(erin, mo), "erin may not get secrets in namespace "+tn.own)
	})
	t.Run("another team's namespace is refused naming what the restore would create", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(erin, restore("backup-key", tn.own, tn.other)),
			"erin may not create secrets in namespace "+tn.other, "the restore writes the archive's Secrets")
	})
	t.Run("every namespace needs the rights at the cluster scope", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(erin, restore("backup-key")), "erin may not create secrets at the cluster scope")
	})
	t.Run("a key she may not read is refused by name", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(erin, restore("someone-elses-key", tn.own)),
			"erin may not get secret someone-elses-key in namespace "+tn.tenant, "spec.source.archive.identitySecretRef")
	})
}
