package graph

import (
	"context"
	"sync/atomic"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// crdServer holds CRDs and counts the lists that read them whole.
func crdServer(t *testing.T, whole *atomic.Int32, crds ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(crds...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*unstructured.UnstructuredList); ok {
				whole.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
}

func TestTheKindsAreReadWholeAgainOnlyWhenACRDChanged(t *testing.T) {
	ctx := context.Background()
	labelled := map[string]string{ClusterctlLabel: ""}
	clusters := crd("cluster.x-k8s.io", "Cluster", "clusters", apiextensionsv1.NamespaceScoped, labelled, version("v1beta2", true))
	clusters.UID = "uid-clusters" // listings tell objects apart by UID
	var whole atomic.Int32
	c := crdServer(t, &whole, &clusters)
	tc := &TypesCache{}
	discover := func(what string, wantWhole int32) *Types {
		t.Helper()
		ts, err := tc.Discover(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Load() != wantWhole {
			t.Errorf("%s: %d whole lists of the CRDs, want %d", what, whole.Load(), wantWhole)
		}
		return ts
	}
	machine := schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}

	first := discover("the first time", 1)
	if again := discover("with no CRD changed", 1); again != first {
		t.Error("with no CRD changed the kinds are not kept")
	}

	machines := crd("cluster.x-k8s.io", "Machine", "machines", apiextensionsv1.NamespaceScoped, labelled, version("v1beta2", true))
	machines.UID = "uid-machines"
	if err := c.Create(ctx, &machines); err != nil {
		t.Fatal(err)
	}
	added := discover("a CRD added", 2)
	if _, ok := added.Lookup(machine); !ok {
		t.Error("the kind of a CRD added is not found")
	}

	if err := c.Get(ctx, client.ObjectKeyFromObject(&machines), &machines); err != nil {
		t.Fatal(err)
	}
	machines.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{version("v1beta2", false), version("v1beta3", true)}
	if err := c.Update(ctx, &machines); err != nil {
		t.Fatal(err)
	}
	updated := discover("a CRD updated", 3)
	if typ, ok := updated.Lookup(machine); !ok || typ.GVK.Version != "v1beta3" {
		t.Errorf("the new storage version of a CRD updated is not seen: %+v", typ)
	}
}
