package creator_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/graph"
)

func TestTheCreatorIsReadFromTheAnnotationsAndUnknownWithoutThem(t *testing.T) {
	mo := &movev1alpha1.MoveOperation{}
	if _, err := creator.Of(mo); err == nil {
		t.Fatal("a MoveOperation without annotations has a creator")
	}
	mo.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: "bob", movev1alpha1.CreatedByGroupsAnnotation: "team-a,system:authenticated"}
	u, err := creator.Of(mo)
	if err != nil || u.Name != "bob" || !slices.Equal(u.Groups, []string{"team-a", "system:authenticated"}) {
		t.Fatalf("creator %+v, %v", u, err)
	}
}

func TestTheSpecNeedsWhatTheMoveDoesOnTheCreatorsBehalf(t *testing.T) {
	spec := movev1alpha1.MoveOperationSpec{
		Target:     movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: "target"}},
		Namespaces: []string{"team-a"},
		Controllers: movev1alpha1.ControllersSpec{Additional: []movev1alpha1.AdditionalController{
			{Namespace: "ops", Name: "in-both"},
			{Cluster: movev1alpha1.ControllerInTarget, Namespace: "ops", Name: "target-only"},
		}},
		GitOps: movev1alpha1.GitOpsSuspend,
	}
	var got []string
	for _, n := range creator.SpecNeeds(spec, "tenant-a") {
		got = append(got, strings.TrimSpace(n.Verb+" "+n.Resource+" "+n.Namespace+"/"+n.Name))
	}
	want := []string{
		"get secrets team-a/", "delete clusters team-a/",
		"get secrets tenant-a/target",
		"patch deployments ops/in-both",
		"patch kustomizations /", "patch helmreleases /", "patch applications /",
	}
	if !slices.Equal(got, want) {
		t.Errorf("needs %v\nwant %v", got, want)
	}
	spec.Namespaces = nil
	if n := creator.SpecNeeds(spec, "tenant-a")[0]; n.Namespace != "" {
		t.Errorf("a move of every namespace needs the rights everywhere: %+v", n)
	}
	spec.GitOps = movev1alpha1.GitOpsRefuse
	spec.Controllers.Selector = movev1alpha1.DefaultControllerSelector()
	before := len(creator.SpecNeeds(spec, "tenant-a"))
	spec.Controllers.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "coredns"}}
	needs := creator.SpecNeeds(spec, "tenant-a")
	if last := needs[len(needs)-1]; len(needs) != before+1 || last.Verb != "patch" || last.Resource != "deployments" || last.Namespace != "" {
		t.Errorf("a selector of the creator's choosing needs patch deployments everywhere: %+v", needs)
	}
}

// A restore writes the archive's objects into the cluster it runs in: its
// creator is asked to create Secrets and Clusters in each namespace there,
// not to read or delete them, and to read the key's Secret.
func TestARestoreNeedsToCreateWhatItWrites(t *testing.T) {
	spec := movev1alpha1.MoveOperationSpec{
		Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
			Directory:         &movev1alpha1.DirectoryStore{},
			Location:          "backup-1",
			IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-key"},
		}},
		Namespaces: []string{"team-a"},
	}
	var got []string
	for _, n := range creator.SpecNeeds(spec, "tenant-a") {
		if n.Cluster != movev1alpha1.ClusterTarget {
			t.Errorf("a restore's need is asked of the cluster it writes into: %+v", n)
		}
		got = append(got, strings.TrimSpace(n.Verb+" "+n.Resource+" "+n.Namespace+"/"+n.Name))
	}
	want := []string{"create secrets team-a/", "create clusters team-a/", "get secrets tenant-a/backup-key"}
	if !slices.Equal(got, want) {
		t.Errorf("needs %v\nwant %v", got, want)
	}
	msg := creator.Refusal(access.User{Name: "bob"}, creator.SpecNeeds(spec, "tenant-a")[1:2], false)
	for _, w := range []string{`"bob" may not create clusters.cluster.x-k8s.io in namespace team-a in this cluster`, "the restore creates the archive's Clusters"} {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal %q\nwant it to hold %q", msg, w)
		}
	}
}

func TestThePlanNeedsEveryMovedObjectReadAndEveryDeletedOneDeleted(t *testing.T) {
	secret := graph.Type{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: "secrets", Namespaced: true}
	cluster := graph.Type{GVK: schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}, Resource: "clusters", Namespaced: true}
	obj := func(t graph.Type, ns, name string, del bool) *graph.Object {
		return &graph.Object{ObjectRef: graph.ObjectRef{GVK: t.GVK, Namespace: ns, Name: name, UID: types.UID("uid-" + ns + name)}, Delete: del}
	}
	plan := graph.NewPlan([][]*graph.Object{{
		obj(cluster, "team-a", "c1", true),
		obj(secret, "team-a", "c1-kubeconfig", true),
		// A cluster-scoped identity's credentials: copied, not deleted,
		// from a namespace the spec does not name.
		obj(secret, "capl-system", "identity-credentials", false),
	}})
	needs, err := creator.PlanNeeds(plan, graph.NewTypes(secret, cluster))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range needs {
		got = append(got, n.Verb+" "+n.Resource+" "+n.Namespace)
	}
	want := []string{"get secrets capl-system", "get secrets team-a", "delete secrets team-a", "get clusters team-a", "delete clusters team-a"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("needs %v\nwant %v", got, want)
	}
}

func TestARefusalNamesTheFirstMissingRightAndWhatItIsFor(t *testing.T) {
	missing := []access.Need{
		{Verb: "get", Resource: "secrets", Namespace: "capl-system"},
		{Verb: "delete", Group: "cluster.x-k8s.io", Resource: "clusters", Namespace: "team-b"},
	}
	msg := creator.Refusal(access.User{Name: "bob"}, missing, false)
	for _, w := range []string{`"bob" may not get secrets in namespace capl-system`, "sends the namespace's Secrets", "1 more"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q lacks %q", msg, w)
		}
	}
	msg = creator.Refusal(access.User{Name: "bob"}, missing, true)
	if !strings.Contains(msg, "the plan reaches them") {
		t.Errorf("a right the plan needs says so: %q", msg)
	}
}

// policyClient serves the shipped policy and binding, created at created.
func policyClient(created time.Time, edit func(*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding)) client.Client {
	p, b := creator.Policy()
	p.Name, b.Name, b.Spec.PolicyName = creator.PolicyName, creator.PolicyName, creator.PolicyName
	p.CreationTimestamp = metav1.NewTime(created)
	b.CreationTimestamp = metav1.NewTime(created)
	if edit != nil {
		edit(p, b)
	}
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(p, b).Build()
}

func TestThePolicyMustBeInstalledAsShippedBoundToDenyAndOlderThanTheMoveOperation(t *testing.T) {
	installed := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	later := metav1.NewTime(installed.Add(time.Hour))
	for _, tc := range []struct {
		name    string
		edit    func(*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		created metav1.Time
		want    string
	}{
		{name: "as shipped, before the MoveOperation: trusted", created: later},
		{name: "installed after the MoveOperation", created: metav1.NewTime(installed.Add(-time.Second)), want: "installed after"},
		{name: "a check removed", created: later, want: "not the one this operator ships",
			edit: func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				p.Spec.Validations = p.Spec.Validations[1:]
			}},
		{name: "failing open", created: later, want: "failurePolicy is Ignore",
			edit: func(p *admissionregistrationv1.ValidatingAdmissionPolicy, _ *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}},
		{name: "a binding that only warns", created: later, want: "no ValidatingAdmissionPolicyBinding",
			edit: func(_ *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
			}},
		{name: "a binding narrowed to some namespaces", created: later, want: "no ValidatingAdmissionPolicyBinding",
			edit: func(_ *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "yes"}}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := creator.Verify(context.Background(), policyClient(installed, tc.edit), creator.PolicyName, tc.created)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var problem *creator.PolicyProblem
			if err == nil || !errors.As(err, &problem) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a PolicyProblem saying %q", err, tc.want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
		err := creator.Verify(context.Background(), c, creator.PolicyName, later)
		if err == nil || !strings.Contains(err.Error(), "is not installed") {
			t.Fatalf("error %v", err)
		}
	})
}
