//go:build cluster

package olderkubernetes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// Both clusters must be what this package is for: were they the release
// the project builds against, every other test here would pass on 1.36
// and prove nothing about 1.33.
func TestTheClustersRunKubernetes133WhichServesNoMutatingAdmissionPolicy(t *testing.T) {
	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		g := NewWithT(t)
		dc, err := discovery.NewDiscoveryClientForConfig(m.Config)
		g.Expect(err).NotTo(HaveOccurred())
		v, err := dc.ServerVersion()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v.GitVersion).To(HavePrefix("v"+release+"."), "the %s cluster's /version", m.Name)
		g.Expect(v.Minor).To(Equal(strings.TrimPrefix(release, "1.")))
		resources, err := dc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, r := range resources.APIResources {
			names = append(names, r.Name)
		}
		g.Expect(names).To(ContainElement("validatingadmissionpolicies"))
		g.Expect(names).NotTo(ContainElement("mutatingadmissionpolicies"), "MutatingAdmissionPolicy is v1 from 1.36 only")
	}
}

// docs/access.md tells users of Kubernetes 1.30 to 1.35 to apply
// dist/install.yaml, which their API server applies but for the
// MutatingAdmissionPolicy and its binding, unknown kinds there: the
// validating policy alone stands between a MoveOperation and the operator.
func TestTheInstallerAppliesButForTheMutatingPolicy(t *testing.T) {
	startOperator(t)
	g := NewWithT(t)
	ctx := context.Background()
	root, err := testenv.RepositoryRoot("go test ./test/olderkubernetes/")
	g.Expect(err).NotTo(HaveOccurred())
	in, err := installed.Read(root)
	g.Expect(err).NotTo(HaveOccurred())
	var notServed []string
	for _, obj := range in.IdentityObjects() {
		_, err := movetest.Env.Source.Client.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
		if meta.IsNoMatchError(err) {
			notServed = append(notServed, obj.GetKind())
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(notServed).To(ConsistOf("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"))

	g.Expect(admin(t).Get(ctx, client.ObjectKey{Name: creator.PolicyName}, &admissionregistrationv1.ValidatingAdmissionPolicy{})).To(Succeed())
	g.Expect(admin(t).Get(ctx, client.ObjectKey{Name: creator.PolicyName}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})).To(Succeed())
}

// The operator is installed as users install it; the requests are dry
// runs, which the API server admits or refuses as it would the real ones,
// and which never reach the operator.
func TestTheValidatingPolicyAdmitsOnlyACreatorWhoNamesThemselvesAndMayDoWhatTheyAsk(t *testing.T) {
	startOperator(t)
	const user = "erin"
	// Her namespace, where she creates MoveOperations and reads Secrets;
	// a shared one, where she may create MoveOperations but read nothing;
	// her fleet's; and another team's.
	ops := testenv.NewNamespace(t, movetest.Env.Source, "ops")
	shared := testenv.NewNamespace(t, movetest.Env.Source, "shared")
	own := testenv.NewNamespace(t, movetest.Env.Source, "fleet")
	other := testenv.NewNamespace(t, movetest.Env.Source, "other")
	bind(t, user, "ClusterRole", "move-operator-mover", ops)
	bind(t, user, "ClusterRole", "edit", ops)
	bind(t, user, "ClusterRole", "move-operator-mover", shared)
	grantAll(t, user, own)
	erin := as(t, user)
	NewWithT(t).Eventually(func() error {
		return erin.List(context.Background(), &movev1alpha1.MoveOperationList{}, client.InNamespace(shared))
	}).WithTimeout(10*time.Second).Should(Succeed(), "RBAC sees her bindings")

	truly := map[string]string{movev1alpha1.CreatedByAnnotation: user, movev1alpha1.CreatedByGroupsAnnotation: "system:authenticated"}
	someoneElse := map[string]string{movev1alpha1.CreatedByAnnotation: "kubernetes-admin", movev1alpha1.CreatedByGroupsAnnotation: "system:masters,system:authenticated"}
	whatToWrite := `set the annotation ` + movev1alpha1.CreatedByAnnotation + ` to "erin" and ` + movev1alpha1.CreatedByGroupsAnnotation + ` to "system:authenticated"`
	repository := "registry.example.com/backups"
	kinds := []struct {
		name string
		spec movev1alpha1.MoveOperationSpec
		// secret is the Secret the spec names, and the field that names it.
		secret, field string
		// secrets is what it does with the Secrets of each namespace it
		// names: a move and a backup read them, a restore creates them.
		secrets string
	}{
		{"a move", movev1alpha1.MoveOperationSpec{
			Target: movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: "target-kubeconfig"}},
		}, "target-kubeconfig", "spec.target.kubeconfigSecretRef", "get"},
		{"a backup", movev1alpha1.MoveOperationSpec{
			Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
				OCI: &movev1alpha1.OCIStore{Repository: repository}, RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-keys"},
			}},
		}, "backup-keys", "spec.target.archive.recipientsSecretRef", "get"},
		{"a restore", movev1alpha1.MoveOperationSpec{
			Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
				OCI: &movev1alpha1.OCIStore{Repository: repository}, Location: repository + "@sha256:" + strings.Repeat("0", 64),
				IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: "restore-key"},
			}},
		}, "restore-key", "spec.source.archive.identitySecretRef", "create"},
	}
	for _, kind := range kinds {
		newOne := func(namespace string, annotations map[string]string, namespaces ...string) *movev1alpha1.MoveOperation {
			return moveOperation(namespace, annotations, kind.spec, namespaces...)
		}
		t.Run(kind.name+" whose creator names herself truly is admitted", func(t *testing.T) {
			NewWithT(t).Expect(dryRun(erin, newOne(ops, truly, own))).To(Succeed())
		})
		t.Run(kind.name+" that does not name its creator is refused, saying what to write", func(t *testing.T) {
			refusedFor(NewWithT(t), dryRun(erin, newOne(ops, nil, own)), whatToWrite)
		})
		t.Run(kind.name+" that names someone else is refused", func(t *testing.T) {
			refusedFor(NewWithT(t), dryRun(erin, newOne(ops, someoneElse, own)), whatToWrite)
		})
		t.Run(kind.name+" of a namespace whose Secrets she may not "+kind.secrets+" is refused naming the right", func(t *testing.T) {
			refusedFor(NewWithT(t), dryRun(erin, newOne(ops, truly, own, other)),
				"erin may not "+kind.secrets+" secrets in namespace "+other+", which spec.namespaces names")
		})
		t.Run(kind.name+" naming a Secret she may not read is refused naming it", func(t *testing.T) {
			refusedFor(NewWithT(t), dryRun(erin, newOne(shared, truly, own)),
				"erin may not get secret "+kind.secret+" in namespace "+shared+", which "+kind.field+" names")
		})
	}
	t.Run("every namespace needs the rights at the cluster scope", func(t *testing.T) {
		refusedFor(NewWithT(t), dryRun(erin, moveOperation(ops, truly, kinds[0].spec)), "erin may not get secrets at the cluster scope")
	})

	// A BackupSchedule takes backups of its template on its creator's
	// behalf: the same policy names her and asks what its backups need.
	schedule := func(namespace string, annotations map[string]string) *movev1alpha1.BackupSchedule {
		template := kinds[1].spec.DeepCopy()
		template.Namespaces = []string{own}
		return &movev1alpha1.BackupSchedule{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "nightly-", Annotations: annotations},
			Spec:       movev1alpha1.BackupScheduleSpec{Schedule: "0 2 * * *", Template: *template},
		}
	}
	t.Run("a backup schedule whose creator names herself truly is admitted", func(t *testing.T) {
		NewWithT(t).Expect(erin.Create(context.Background(), schedule(ops, truly), client.DryRunAll)).To(Succeed())
	})
	t.Run("a backup schedule that does not name its creator is refused, saying what to write", func(t *testing.T) {
		refusedFor(NewWithT(t), erin.Create(context.Background(), schedule(ops, nil), client.DryRunAll), whatToWrite)
	})
	t.Run("a backup schedule naming a Secret she may not read is refused naming it", func(t *testing.T) {
		refusedFor(NewWithT(t), erin.Create(context.Background(), schedule(shared, truly), client.DryRunAll),
			"erin may not get secret backup-keys in namespace "+shared+", which spec.template.target.archive.recipientsSecretRef names")
	})
}

// moveOperation is a MoveOperation in namespace with the annotations given
// and spec, moving namespaces.
func moveOperation(namespace string, annotations map[string]string, spec movev1alpha1.MoveOperationSpec, namespaces ...string) *movev1alpha1.MoveOperation {
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "older-", Annotations: annotations},
		Spec:       *spec.DeepCopy(),
	}
	mo.Spec.Namespaces = namespaces
	return mo
}

func dryRun(c client.Client, mo *movev1alpha1.MoveOperation) error {
	return c.Create(context.Background(), mo, client.DryRunAll)
}

// refusedFor expects the API server to refuse a request with a message
// that holds every one of wants.
func refusedFor(g Gomega, err error, wants ...string) {
	g.Expect(err).To(HaveOccurred(), "the API server admitted it")
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "refused as forbidden: %v", err)
	for _, w := range wants {
		g.Expect(err.Error()).To(ContainSubstring(w))
	}
}

// bind gives user a role (kind Role or ClusterRole) in namespace until the
// test ends, as an administrator does with a RoleBinding.
func bind(t *testing.T, user, kind, role, namespace string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: strings.ToLower(kind) + "-" + role + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	create(t, rb)
}

// grantAll gives user every right in one namespace until the test ends:
// her fleet's.
func grantAll(t *testing.T, user, namespace string) {
	t.Helper()
	create(t, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "everything"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	})
	bind(t, user, "Role", "everything", namespace)
}

// grantClusterWide gives user one rule at the cluster scope until the test
// ends.
func grantClusterWide(t *testing.T, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	name := "older-" + user + "-" + rand.String(4)
	create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}})
	create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	})
}

// create creates obj in the source as the administrator and deletes it
// when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(admin(t).Create(context.Background(), obj)).To(Succeed())
	t.Cleanup(func() {
		if err := admin(t).Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	})
}
