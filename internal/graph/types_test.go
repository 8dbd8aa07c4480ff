package graph

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func crd(group, kind, plural string, scope apiextensionsv1.ResourceScope, labels map[string]string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) apiextensionsv1.CustomResourceDefinition {
	return apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: labels},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope, Versions: versions,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1beta2"}},
	}
}

func version(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage}
}

func withStatus(v apiextensionsv1.CustomResourceDefinitionVersion) apiextensionsv1.CustomResourceDefinitionVersion {
	v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	return v
}

func TestTypesFromCRDs(t *testing.T) {
	clusterctl := map[string]string{ClusterctlLabel: ""}
	tests := []struct {
		name    string
		crds    []apiextensionsv1.CustomResourceDefinition
		want    []Type
		wantErr bool
	}{
		{
			name: "Secrets and ConfigMaps are always considered",
			want: CoreTypes(),
		},
		{
			name: "each kind is read at its storage version, not the newest one",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("cluster.x-k8s.io", "Machine", "machines", apiextensionsv1.NamespaceScoped, clusterctl,
					version("v1beta1", true), version("v1beta2", false)),
			},
			want: append(CoreTypes(), Type{
				GVK: schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Machine"}, Resource: "machines",
				Namespaced: true, StoredVersions: []string{"v1beta2"},
			}),
		},
		{
			name: "Cluster, ClusterClass and ClusterResourceSet are hierarchy roots without any label",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("cluster.x-k8s.io", "Cluster", "clusters", apiextensionsv1.NamespaceScoped, clusterctl, version("v1beta2", true)),
				crd("cluster.x-k8s.io", "ClusterClass", "clusterclasses", apiextensionsv1.NamespaceScoped, clusterctl, version("v1beta2", true)),
				crd("addons.cluster.x-k8s.io", "ClusterResourceSet", "clusterresourcesets", apiextensionsv1.NamespaceScoped, clusterctl, version("v1beta2", true)),
			},
			want: append(CoreTypes(),
				Type{GVK: gvkCluster, Resource: "clusters", Namespaced: true, Move: true, MoveHierarchy: true, StoredVersions: []string{"v1beta2"}},
				Type{GVK: gvkClusterClass, Resource: "clusterclasses", Namespaced: true, Move: true, MoveHierarchy: true, StoredVersions: []string{"v1beta2"}},
				Type{GVK: gvkCRS, Resource: "clusterresourcesets", Namespaced: true, Move: true, MoveHierarchy: true, StoredVersions: []string{"v1beta2"}},
			),
		},
		{
			name: "a CRD labelled move-hierarchy makes its objects roots, and a cluster-scoped CRD makes global objects",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("infrastructure.cluster.x-k8s.io", "TestClusterIdentity", "testclusteridentities", apiextensionsv1.ClusterScoped,
					map[string]string{ClusterctlLabel: "", MoveHierarchyLabel: ""}, version("v1beta2", true)),
			},
			want: append(CoreTypes(), Type{
				GVK:      schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "TestClusterIdentity"},
				Resource: "testclusteridentities", Move: true, MoveHierarchy: true, StoredVersions: []string{"v1beta2"},
			}),
		},
		{
			name: "a CRD labelled move forces its objects to move, but they are not roots",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("infrastructure.cluster.x-k8s.io", "TestWidget", "testwidgets", apiextensionsv1.NamespaceScoped,
					map[string]string{ClusterctlLabel: "", MoveLabel: ""}, version("v1beta2", true)),
			},
			want: append(CoreTypes(), Type{
				GVK:      schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "TestWidget"},
				Resource: "testwidgets", Namespaced: true, Move: true, StoredVersions: []string{"v1beta2"},
			}),
		},
		{
			name: "a kind's status subresource is its storage version's",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("cluster.x-k8s.io", "Machine", "machines", apiextensionsv1.NamespaceScoped, clusterctl,
					withStatus(version("v1beta1", false)), withStatus(version("v1beta2", true))),
				crd("cluster.x-k8s.io", "MachineSet", "machinesets", apiextensionsv1.NamespaceScoped, clusterctl,
					version("v1beta1", true), withStatus(version("v1beta2", false))),
			},
			want: append(CoreTypes(),
				Type{GVK: gvkMachine, Resource: "machines", Namespaced: true, StoredVersions: []string{"v1beta2"}, StatusSubresource: true},
				Type{GVK: schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachineSet"}, Resource: "machinesets", Namespaced: true, StoredVersions: []string{"v1beta2"}},
			),
		},
		{
			name: "a kind names the provider that installed it, as clusterctl labels its CRD",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kubeadmconfigs", apiextensionsv1.NamespaceScoped,
					map[string]string{ClusterctlLabel: "", ProviderLabel: "bootstrap-kubeadm"}, version("v1beta2", true)),
			},
			want: append(CoreTypes(), Type{
				GVK: schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}, Resource: "kubeadmconfigs",
				Namespaced: true, StoredVersions: []string{"v1beta2"}, Provider: "bootstrap-kubeadm",
			}),
		},
		{
			name: "a CRD without a storage version is refused",
			crds: []apiextensionsv1.CustomResourceDefinition{
				crd("cluster.x-k8s.io", "Machine", "machines", apiextensionsv1.NamespaceScoped, clusterctl, version("v1beta2", false)),
			},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := TypesFromCRDs(tt.crds)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("TypesFromCRDs succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("TypesFromCRDs: %v", err)
			}
			var got []Type
			for _, typ := range ts.All() {
				got = append(got, *typ)
			}
			want := NewTypes(tt.want...).All()
			var wantTypes []Type
			for _, typ := range want {
				wantTypes = append(wantTypes, *typ)
			}
			if diff := cmp.Diff(wantTypes, got); diff != "" {
				t.Errorf("types differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTypesLookupIgnoresTheVersion(t *testing.T) {
	ts := testTypes()
	typ, ok := ts.Lookup(gvkOldMachineVersion.GroupKind())
	if !ok {
		t.Fatalf("Machine not found")
	}
	if typ.GVK != gvkMachine {
		t.Errorf("Lookup(Machine at v1beta1) = %v, want the storage version %v", typ.GVK, gvkMachine)
	}
	if _, ok := ts.Lookup(gvkDeployment.GroupKind()); ok {
		t.Errorf("Deployment found, but it is not a kind that moves")
	}
}

func TestKindsCompareAsTheirKindStrings(t *testing.T) {
	kinds := []schema.GroupKind{
		{Kind: "Secret"}, {Kind: "ConfigMap"}, {Kind: "Foo"}, {Kind: "FooBar"},
		{Group: "cluster.x-k8s.io", Kind: "Cluster"}, {Group: "cluster.x-k8s.io", Kind: "ClusterClass"},
		{Group: "a", Kind: "Foo"}, {Group: "b", Kind: "Foo"}, {Group: "a-b", Kind: "Foo"}, {Group: "a", Kind: "Foo0"},
		{Group: "infrastructure.cluster.x-k8s.io", Kind: "LoopCluster"}, {Group: "x", Kind: "Fo"},
	}
	for _, a := range kinds {
		for _, b := range kinds {
			want := strings.Compare(KindString(a), KindString(b))
			if got := compareKinds(a, b); got != want {
				t.Errorf("compareKinds(%s, %s) = %d, want %d as their KindStrings compare", KindString(a), KindString(b), got, want)
			}
		}
	}
}
