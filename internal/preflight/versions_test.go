package preflight_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// kind is a type stored at version, with storedVersions as given (the
// storage version alone when none).
func kind(group, k, resource, version string, storedVersions ...string) graph.Type {
	if len(storedVersions) == 0 {
		storedVersions = []string{version}
	}
	return graph.Type{
		GVK:            schema.GroupVersionKind{Group: group, Version: version, Kind: k},
		Resource:       resource,
		Namespaced:     true,
		StoredVersions: storedVersions,
	}
}

func types(ts ...graph.Type) *graph.Types {
	return graph.NewTypes(append(graph.CoreTypes(), ts...)...)
}

const (
	core    = "cluster.x-k8s.io"
	kubeadm = "controlplane.cluster.x-k8s.io"
	infra   = "infrastructure.cluster.x-k8s.io"
)

func TestKindVersions(t *testing.T) {
	tests := []struct {
		name           string
		source, target *graph.Types
		// want is, per kind, "source>target conversion refusal".
		want map[string]string
		// says are what the message of each kind must say.
		says map[string][]string
	}{
		{
			name:   "kinds stored at one version in both clusters need nothing",
			source: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(infra, "DockerCluster", "dockerclusters", "v1beta2")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(infra, "DockerCluster", "dockerclusters", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                      "v1beta2>v1beta2 None ",
				"DockerCluster.infrastructure.cluster.x-k8s.io": "v1beta2>v1beta2 None ",
			},
		},
		{
			name: "Cluster API's kinds of a v1beta1 source convert into a v1beta2 target, in the operator",
			source: types(kind(core, "Cluster", "clusters", "v1beta1"), kind(core, "Machine", "machines", "v1beta1"),
				kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(core, "Machine", "machines", "v1beta2"),
				kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                          "v1beta1>v1beta2 ToNewer ",
				"Machine.cluster.x-k8s.io":                          "v1beta1>v1beta2 ToNewer ",
				"KubeadmControlPlane.controlplane.cluster.x-k8s.io": "v1beta1>v1beta2 ToNewer ",
			},
			says: map[string][]string{"Cluster.cluster.x-k8s.io": {"clusters", "v1beta1", "v1beta2", "Cluster API's own code"}},
		},
		{
			name:   "a provider's kind stored at another version is refused by name: it converts only in its provider",
			source: types(kind(core, "Cluster", "clusters", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(infra, "DockerMachine", "dockermachines", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                      "v1beta1>v1beta2 ToNewer ",
				"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta1>v1beta2  NewerInTarget",
			},
			says: map[string][]string{"DockerMachine.infrastructure.cluster.x-k8s.io": {
				"dockermachines", "v1beta1", "v1beta2", "convert only in that provider", "DockerMachine.infrastructure.cluster.x-k8s.io", "upgrade the provider in the source", "install in the target the version the source runs"}},
		},
		{
			name:   "a kind the target does not serve is refused by name",
			source: types(kind(core, "Cluster", "clusters", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                      "v1beta1>v1beta2 ToNewer ",
				"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta1>  NotInTarget",
			},
			says: map[string][]string{"DockerMachine.infrastructure.cluster.x-k8s.io": {"dockermachines", "not served by the target", "install there the provider"}},
		},
		{
			name: "Cluster API's kinds of a v1beta2 source go back into a v1beta1 target, converted in the operator; a provider's kind is refused by name",
			source: types(kind(core, "Machine", "machines", "v1beta2"), kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2"),
				kind("runtime.cluster.x-k8s.io", "ExtensionConfig", "extensionconfigs", "v1beta2"), kind(infra, "DockerMachine", "dockermachines", "v1beta2")),
			target: types(kind(core, "Machine", "machines", "v1beta1"), kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1"),
				kind("runtime.cluster.x-k8s.io", "ExtensionConfig", "extensionconfigs", "v1alpha1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			want: map[string]string{
				"Machine.cluster.x-k8s.io":                          "v1beta2>v1beta1 ToOlder ",
				"KubeadmControlPlane.controlplane.cluster.x-k8s.io": "v1beta2>v1beta1 ToOlder ",
				"ExtensionConfig.runtime.cluster.x-k8s.io":          "v1beta2>v1alpha1 ToOlder ",
				"DockerMachine.infrastructure.cluster.x-k8s.io":     "v1beta2>v1beta1  OlderInTarget",
			},
			says: map[string][]string{
				"Machine.cluster.x-k8s.io":                      {"machines", "older v1beta1", "converts each object back with Cluster API's own code", "refuses the move if one holds what v1beta1 cannot"},
				"DockerMachine.infrastructure.cluster.x-k8s.io": {"only at the older v1beta1", "convert only in that provider", "install in the target the provider version the source runs"},
			},
		},
		{
			name:   "going back to a version Cluster API's code does not convert is refused, naming those it does",
			source: types(kind(core, "Cluster", "clusters", "v1beta2")),
			target: types(kind(core, "Cluster", "clusters", "v1alpha4")),
			want:   map[string]string{"Cluster.cluster.x-k8s.io": "v1beta2>v1alpha4  OlderInTarget"},
			says:   map[string][]string{"Cluster.cluster.x-k8s.io": {"only at the older v1alpha4", "only between v1beta1, v1beta2"}},
		},
		{
			name:   "a version pair Cluster API's code does not convert is refused, naming those it does",
			source: types(kind(core, "Cluster", "clusters", "v1alpha4")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2")),
			want:   map[string]string{"Cluster.cluster.x-k8s.io": "v1alpha4>v1beta2  NewerInTarget"},
			says:   map[string][]string{"Cluster.cluster.x-k8s.io": {"only between v1beta1, v1beta2", "upgrade the provider in the source in place first"}},
		},
		{
			name:   "objects still stored at an older version in the source are refused, converted or not",
			source: types(kind(core, "Cluster", "clusters", "v1beta1", "v1alpha4", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2")),
			want:   map[string]string{"Cluster.cluster.x-k8s.io": "v1beta1>v1beta2 ToNewer StoredAtOtherVersions"},
			says:   map[string][]string{"Cluster.cluster.x-k8s.io": {"clusters in the source still has objects stored at v1alpha4", "trim status.storedVersions"}},
		},
		{
			name:   "a refused kind also says when its objects are stored at other versions",
			source: types(kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			target: types(kind(infra, "DockerMachine", "dockermachines", "v1beta2", "v1beta1", "v1beta2")),
			want:   map[string]string{"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta1>v1beta2  NewerInTarget"},
			says:   map[string][]string{"DockerMachine.infrastructure.cluster.x-k8s.io": {"convert only in that provider", "dockermachines in the target still has objects stored at v1beta1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, kv := range preflight.KindVersions(tt.source, tt.target) {
				k := graph.KindString(kv.GroupKind)
				got[k] = kv.Source + ">" + kv.Target + " " + string(kv.Conversion) + " " + string(kv.Refusal)
				for _, s := range tt.says[k] {
					if !strings.Contains(kv.Message, s) {
						t.Errorf("%s: message %q does not say %q", k, kv.Message, s)
					}
				}
				if kv.Refusal != "" && kv.Conversion != "" && kv.Refusal != preflight.RefusalStoredAtOtherVersions {
					t.Errorf("%s: refused (%s) and converted (%s) at once", k, kv.Refusal, kv.Conversion)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("KindVersions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKindVersionsAreSortedByKindAndLeaveOutSecretsAndConfigMaps(t *testing.T) {
	source := types(kind(core, "Machine", "machines", "v1beta1"), kind(core, "Cluster", "clusters", "v1beta1"))
	var got []string
	for _, kv := range preflight.KindVersions(source, source) {
		got = append(got, graph.KindString(kv.GroupKind))
	}
	if diff := cmp.Diff([]string{"Cluster.cluster.x-k8s.io", "Machine.cluster.x-k8s.io"}, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}

// CheckKindVersions is CheckCRDs' contract (nil, or one error naming every
// kind) with the differences the operator converts let through.
func TestCheckKindVersions(t *testing.T) {
	older := types(kind(core, "Cluster", "clusters", "v1beta1"), kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1"))
	newer := types(kind(core, "Cluster", "clusters", "v1beta2"), kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2"))
	if err := preflight.CheckKindVersions(older, newer); err != nil {
		t.Errorf("v1beta1 into v1beta2: %v, want none: the operator converts both kinds", err)
	}
	if err := preflight.CheckCRDs(older, newer); err == nil {
		t.Error("CheckCRDs let v1beta1 into v1beta2 through: this test no longer shows the difference")
	}

	withProvider := types(kind(core, "Cluster", "clusters", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1"))
	newerProvider := types(kind(core, "Cluster", "clusters", "v1beta2"))
	err := preflight.CheckKindVersions(withProvider, newerProvider)
	if err == nil {
		t.Fatal("no error, want one naming dockermachines")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "the CRDs do not allow a move: ") || !strings.Contains(msg, "dockermachines") || strings.Contains(msg, "clusters (") {
		t.Errorf("error %q: want CheckCRDs' prefix, dockermachines named and nothing about clusters", msg)
	}
}

// crd is a CRD labelled for clusterctl, stored at version.
func crd(group, kind, plural, version string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, UID: k8stypes.UID(plural + "-uid"), Labels: map[string]string{graph.ClusterctlLabel: ""}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Served: true, Storage: true}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{version}},
	}
}

// fakeManagement is a cluster with its kube-system namespace (its ID) and
// the given CRDs.
func fakeManagement(t *testing.T, id string, crds ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: k8stypes.UID(id)}}}, crds...)
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

// Validating decides, per kind, the version the target takes it at: Cluster
// API's kinds of a v1.10 source convert into a v1.14 target, and a
// provider's kind stored at another version in each is refused by name,
// with what to install, reason CRDMismatch, before anything is stopped
// (the checks write nothing).
func TestValidatingConvertsClusterAPIsKindsAndRefusesAProvidersKindStoredAtAnotherVersion(t *testing.T) {
	source := fakeManagement(t, "source",
		crd(core, "Cluster", "clusters", "v1beta1"), crd(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1"),
		crd(infra, "LoopMachine", "loopmachines", "v1alpha1"))
	target := fakeManagement(t, "target",
		crd(core, "Cluster", "clusters", "v1beta2"), crd(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2"),
		crd(infra, "LoopMachine", "loopmachines", "v1alpha2"))
	e := &preflight.Env{
		Source: source,
		Connect: func(context.Context) (*remote.Target, error) {
			return &remote.Target{Client: target, Server: "https://target"}, nil
		},
	}
	var checks []preflight.Check
	for _, c := range preflight.Checks() {
		if c.Name == "target" || c.Name == "kinds" {
			checks = append(checks, c)
		}
	}
	if err := preflight.Evaluate(context.Background(), e, checks); err != nil {
		t.Fatal(err)
	}

	got := map[string]string{}
	for _, kv := range preflight.StatusOf(e.KindVersions) {
		got[kv.Kind] = kv.Source + ">" + kv.Target + " " + string(kv.Conversion) + " " + string(kv.Refusal)
	}
	want := map[string]string{
		"Cluster.cluster.x-k8s.io":                          "v1beta1>v1beta2 ToNewer ",
		"KubeadmControlPlane.controlplane.cluster.x-k8s.io": "v1beta1>v1beta2 ToNewer ",
		"LoopMachine.infrastructure.cluster.x-k8s.io":       "v1alpha1>v1alpha2  NewerInTarget",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the versions status.plan lists (-want +got):\n%s", diff)
	}
	if len(e.Findings) != 1 || e.Findings[0].Reason != movev1alpha1.ReasonCRDMismatch || e.Findings[0].Retry {
		t.Fatalf("findings %+v, want one CRDMismatch that fails the move", e.Findings)
	}
	msg := e.Findings[0].Message
	for _, says := range []string{"loopmachines", "LoopMachine.infrastructure.cluster.x-k8s.io", "install in the target the version the source runs"} {
		if !strings.Contains(msg, says) {
			t.Errorf("the refusal %q does not say %q", msg, says)
		}
	}
	if strings.Contains(msg, "clusters") || strings.Contains(msg, "kubeadmcontrolplanes") {
		t.Errorf("the refusal %q names kinds the operator converts", msg)
	}
	versions := preflight.TargetVersions(e.KindVersions)
	wantVersions := map[schema.GroupKind]string{{Group: core, Kind: "Cluster"}: "v1beta2", {Group: kubeadm, Kind: "KubeadmControlPlane"}: "v1beta2"}
	if diff := cmp.Diff(wantVersions, versions); diff != "" {
		t.Errorf("the versions the plan writes the target at (-want +got):\n%s", diff)
	}
}

// What the target holds already of a plan is read at the versions the
// target stores the kinds at: a v1beta1 Cluster of the source is looked
// for among the target's v1beta2 Clusters, where no conversion webhook is
// asked (a target that serves only v1beta2 here).
func TestCheckTargetReadsTheTargetAtTheVersionsItStoresTheKindsAt(t *testing.T) {
	v1beta1 := schema.GroupVersionKind{Group: core, Version: "v1beta1", Kind: "Cluster"}
	v1beta2 := v1beta1.GroupKind().WithVersion("v1beta2")
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.AddKnownTypeWithName(v1beta2, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(v1beta2.GroupVersion().WithKind("ClusterList"), &unstructured.UnstructuredList{})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1beta2, meta.RESTScopeNamespace)
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(v1beta2)
	existing.SetNamespace("fleet")
	existing.SetName("prod")
	target := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(existing).Build()

	plan := graph.NewPlan([][]*graph.Object{{{ObjectRef: graph.ObjectRef{GVK: v1beta1, Namespace: "fleet", Name: "prod", UID: "uid-prod"}, Delete: true}}})
	plan.SetTargetVersions(map[schema.GroupKind]string{v1beta1.GroupKind(): "v1beta2"})
	sourceScheme := runtime.NewScheme()
	sourceScheme.AddKnownTypeWithName(v1beta1, &unstructured.Unstructured{})
	sourceMapper := meta.NewDefaultRESTMapper(nil)
	sourceMapper.Add(v1beta1, meta.RESTScopeNamespace)
	inSource := existing.DeepCopy()
	inSource.SetGroupVersionKind(v1beta1)
	inSource.SetUID("uid-prod")
	source := fake.NewClientBuilder().WithScheme(sourceScheme).WithRESTMapper(sourceMapper).WithObjects(inSource).Build()
	in, err := preflight.CheckTarget(context.Background(), source, target, "target", plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Conflicts) != 1 || in.Conflicts[0].Name != "prod" {
		t.Errorf("conflicts %v, want the v1beta2 Cluster prod the target holds", in.Conflicts)
	}
}
