package move

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
)

// TestDeleteGroupPatchesOnlyWhatHasFinalizers shows the two ways an object
// leaves the source: an object without finalizers, unchanged since the plan
// read it, by its DELETE alone; an object with finalizers, or one changed
// since it was read (here a finalizer added), by the patch that annotates
// it and drops its finalizers, then the DELETE.
func TestDeleteGroupPatchesOnlyWhatHasFinalizers(t *testing.T) {
	ctx := context.Background()
	objects := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain-uid",
			Labels: map[string]string{graph.MoveLabel: ""}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "finalized", UID: "finalized-uid",
			Labels: map[string]string{graph.MoveLabel: ""}, Finalizers: []string{"example.com/keep"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "changed", UID: "changed-uid",
			Labels: map[string]string{graph.MoveLabel: ""}}},
	}
	var (
		mu      sync.Mutex
		patches = map[string]string{}
		deletes = map[string]int{}
	)
	source := interceptor.NewClient(fake.NewClientBuilder().WithObjects(objects...).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			mu.Lock()
			patches[obj.GetName()] = string(data)
			mu.Unlock()
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			mu.Lock()
			deletes[obj.GetName()]++
			mu.Unlock()
			return c.Delete(ctx, obj, opts...)
		},
	})

	// The plan reads the objects as they are now, resourceVersions included.
	plan := configMapPlan(t, ctx, source)
	for _, o := range plan.Objects() {
		if !o.Delete || o.ResourceVersion == "" {
			t.Fatalf("%s: Delete %v, resourceVersion %q; want a deleted object read with its resourceVersion", o, o.Delete, o.ResourceVersion)
		}
	}

	// Something adds a finalizer to "changed" after the plan read it.
	changed := &corev1.ConfigMap{}
	if err := source.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "changed"}, changed); err != nil {
		t.Fatal(err)
	}
	changed.Finalizers = []string{"example.com/late"}
	if err := source.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}

	deleted := 0
	for group := len(plan.Groups) - 1; group >= 0; group-- {
		result, err := DeleteGroup(ctx, source, plan, group, Options{})
		if err != nil {
			t.Fatal(err)
		}
		deleted += result.Deleted
	}
	if deleted != len(objects) {
		t.Errorf("deleted %d objects, want %d", deleted, len(objects))
	}
	for _, o := range objects {
		err := source.Get(ctx, client.ObjectKeyFromObject(o), &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s is still in the source (%v)", o.GetName(), err)
		}
	}
	if p, ok := patches["plain"]; ok {
		t.Errorf("plain, without finalizers, was patched: %s", p)
	}
	for _, name := range []string{"finalized", "changed"} {
		p := patches[name]
		if !strings.Contains(p, graph.DeleteForMoveAnnotation) || !strings.Contains(p, `"finalizers":null`) {
			t.Errorf("%s was patched with %q; want the delete-for-move annotation and no finalizers", name, p)
		}
	}
	// plain: one DELETE; finalized: the patch, then one DELETE; changed: a
	// DELETE refused because it changed, the patch, then a DELETE.
	want := map[string]int{"plain": 1, "finalized": 1, "changed": 2}
	for name, n := range want {
		if deletes[name] != n {
			t.Errorf("%s: %d DELETE requests, want %d", name, deletes[name], n)
		}
	}
}

// configMapPlan plans the move of every ConfigMap in c, read as the
// discovery reads them: resourceVersions and finalizers included.
func configMapPlan(t *testing.T, ctx context.Context, c client.Client) *graph.Plan {
	t.Helper()
	g := graph.New(graph.NewTypes(graph.CoreTypes()...), nil)
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("v1")
	list.SetKind("ConfigMapList")
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if err := g.Add(&list.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	return g.Plan(graph.Selection{})
}
