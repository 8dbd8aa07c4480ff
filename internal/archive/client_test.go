package archive

import (
	"bytes"
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAnArchiveReadsAsAClusterServingItsObjects(t *testing.T) {
	objs := fleet()
	objs[2].SetLabels(map[string]string{"role": "worker"})
	other := object("cluster.x-k8s.io/v1beta2", "Machine", "ns-b", "two-m", "uid-machine-b")
	objs = append(objs, other)
	a, err := Read(bytes.NewReader(write(t, Encryption{Unencrypted: true}, objs)))
	if err != nil {
		t.Fatal(err)
	}
	r := a.Reader()
	ctx := context.Background()
	machines := schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineList"}

	t.Run("Get returns a whole object, status and data included, that the caller may change", func(t *testing.T) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
		if err := r.Get(ctx, client.ObjectKey{Namespace: "ns-a", Name: "one"}, got); err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedBool(got.Object, "status", "initialization", "infrastructureProvisioned"); !v || got.GetUID() != "uid-cluster" {
			t.Errorf("got %v, want the archived Cluster with its status", got.Object)
		}
		got.SetName("changed")
		again := &unstructured.Unstructured{}
		again.SetGroupVersionKind(got.GroupVersionKind())
		if err := r.Get(ctx, client.ObjectKey{Namespace: "ns-a", Name: "one"}, again); err != nil {
			t.Errorf("the archive's object changed with the caller's copy: %v", err)
		}
	})
	t.Run("Get of what the archive lacks is NotFound", func(t *testing.T) {
		got := &metav1.PartialObjectMetadata{}
		got.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
		if err := r.Get(ctx, client.ObjectKey{Namespace: "ns-b", Name: "one-kubeconfig"}, got); !apierrors.IsNotFound(err) {
			t.Errorf("Get of a Secret in another namespace returned %v, want NotFound", err)
		}
	})
	t.Run("List narrows by kind, namespace and labels, as metadata or whole", func(t *testing.T) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(machines)
		if err := r.List(ctx, list); err != nil || len(list.Items) != 2 {
			t.Fatalf("listing every Machine: %d items, %v; want 2", len(list.Items), err)
		}
		if err := r.List(ctx, list, client.InNamespace("ns-b")); err != nil || len(list.Items) != 1 || list.Items[0].UID != "uid-machine-b" {
			t.Errorf("listing the Machines of ns-b: %v, %v; want two-m", list.Items, err)
		}
		whole := &unstructured.UnstructuredList{}
		whole.SetGroupVersionKind(machines)
		sel := client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{"role": "worker"})}
		if err := r.List(ctx, whole, sel); err != nil || len(whole.Items) != 1 || whole.Items[0].GetName() != "one-m" {
			t.Errorf("listing the Machines labelled role=worker: %v, %v; want one-m", whole.Items, err)
		}
		if phase, _, _ := unstructured.NestedString(whole.Items[0].Object, "status", "phase"); phase != "Running" {
			t.Errorf("a listed object lost its status: %v", whole.Items[0].Object)
		}
	})
}
