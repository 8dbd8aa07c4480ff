package move

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/internal/graph"
)

// Rollback deletes from the target everything this operation created there:
// every object of the given kinds labelled with the operation, then the
// namespaces it created (unless objects it did not create have appeared in
// them). Objects it did not create (a conflicting object, a global object
// that was already there) carry no such label and are left alone. When the
// plan is given, objects go in the reverse of its creation order, as in the
// source, so that no object goes before what depends on it (a
// ClusterClass's webhook refuses its deletion while Clusters use it);
// labelled objects the plan does not know go first. Each deletion is the
// move's own (see DeleteGroup): delete-for-move annotation and finalizers
// dropped in one patch, then DELETE, both naming the object's UID. It
// returns how many objects and namespaces it deleted.
func Rollback(ctx context.Context, target client.Client, ts *graph.Types, plan *graph.Plan, operation string, opts Options) (int, error) {
	labelled, err := Labelled(ctx, target, ts, operation)
	if err != nil {
		return 0, fmt.Errorf("rolling back the target: %w", err)
	}
	// Order: by plan group, last group first; unknown objects before all;
	// namespaces after all.
	type key struct {
		gk              schema.GroupKind
		namespace, name string
	}
	groups := map[key]int{}
	if plan != nil {
		for _, o := range plan.Objects() {
			groups[key{o.GroupKind(), o.Namespace, o.Name}] = o.Group
		}
	}
	rank := func(r graph.ObjectRef) int {
		if r.GVK == namespaceGVK {
			return -1
		}
		if g, ok := groups[key{r.GroupKind(), r.Namespace, r.Name}]; ok {
			return g
		}
		return math.MaxInt
	}
	byRank := map[int][]graph.ObjectRef{}
	var ranks []int
	for _, r := range labelled {
		k := rank(r)
		if _, ok := byRank[k]; !ok {
			ranks = append(ranks, k)
		}
		byRank[k] = append(byRank[k], r)
	}
	slices.Sort(ranks)
	slices.Reverse(ranks)

	logger := log.FromContext(ctx)
	deleted := 0
	for _, k := range ranks {
		refs := byRank[k]
		var mu sync.Mutex
		err := forEach(ctx, refs, opts.concurrency(), func(ctx context.Context, ref graph.ObjectRef) error {
			var ok bool
			var err error
			if ref.GVK == namespaceGVK {
				ok, err = deleteNamespace(ctx, target, ts, ref)
			} else {
				// Found by listing, without a resourceVersion to insist
				// on: the long way, annotation and finalizers first.
				ok, err = deleteForMove(ctx, target, &graph.Object{ObjectRef: ref})
			}
			if err != nil {
				return fmt.Errorf("deleting %s from the target: %w", ref, err)
			}
			if ok {
				mu.Lock()
				deleted++
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			return deleted, fmt.Errorf("rolling back the target: %w", err)
		}
	}
	logger.V(1).Info("rolled back the target", "deleted", deleted)
	return deleted, nil
}

// deleteNamespace deletes a namespace this operation created, unless
// something it did not create has appeared there since: deleting the
// namespace would delete that too, and it is not the move's to remove. A
// namespace has no finalizers of its own to drop: the namespace controller
// empties it.
func deleteNamespace(ctx context.Context, c client.Client, ts *graph.Types, ref graph.ObjectRef) (bool, error) {
	for _, typ := range ts.All() {
		if !typ.Namespaced {
			continue
		}
		var other string
		err := listMetadata(ctx, c, typ.GVK, []client.ListOption{client.InNamespace(ref.Name)}, func(obj client.Object) error {
			// Every namespace gets this ConfigMap from the API server.
			if other == "" && (typ.GVK.Kind != "ConfigMap" || typ.GVK.Group != "" || obj.GetName() != "kube-root-ca.crt") {
				other = obj.GetName()
			}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("listing %s in namespace %s: %w", graph.KindString(typ.GVK.GroupKind()), ref.Name, err)
		}
		if other != "" {
			log.FromContext(ctx).Info("leaving a namespace the move created: it holds objects the move did not create",
				"namespace", ref.Name, "kind", graph.KindString(typ.GVK.GroupKind()), "name", other)
			return false, nil
		}
	}
	obj := metadataObject(ref.GVK, "", ref.Name)
	err := retry(ctx, func() error { return c.Delete(ctx, obj, client.Preconditions{UID: &ref.UID}) })
	if gone(err) {
		return false, nil
	}
	return err == nil, err
}
