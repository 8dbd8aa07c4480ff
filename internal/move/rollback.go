package move

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/internal/graph"
)

// Rollback deletes from the target everything this operation created there
// for the plan: each object of the plan that is this operation's copy
// (IsCopyOf, with the copies it recorded), then the namespaces the
// operation created (unless objects it did not create have appeared in
// them). Objects the target had when the plan was recorded, objects created
// there by anyone else, and copies an earlier move made are left alone.
// Objects go in the reverse of the
// plan's creation order, as in the source, so that no object goes before
// what depends on it (a ClusterClass's webhook refuses its deletion while
// Clusters use it). Each deletion is the move's own (see DeleteGroup):
// delete-for-move annotation and finalizers dropped in one patch, then
// DELETE, both naming the copy's UID. It returns how many objects and
// namespaces it deleted.
func Rollback(ctx context.Context, target client.Client, ts *graph.Types, plan *graph.Plan, operation string, copies map[types.UID]bool, opts Options) (int, error) {
	logger := log.FromContext(ctx)
	var mu sync.Mutex
	deleted := 0
	for g := len(plan.Groups) - 1; g >= 0; g-- {
		var candidates []*graph.Object
		for _, o := range plan.Groups[g] {
			if !o.FoundInTarget {
				candidates = append(candidates, o)
			}
		}
		err := forEach(ctx, candidates, opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
			copied, ok, err := ownCopy(ctx, target, plan, o, operation, copies)
			if err != nil || !ok {
				return err
			}
			ok, err = deleteForMove(ctx, target, &graph.Object{ObjectRef: copied})
			if err != nil {
				return fmt.Errorf("deleting %s from the target: %w", copied, err)
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
	for _, name := range plan.Namespaces() {
		ns := metadataObject(namespaceGVK, "", name)
		if err := retryTransient(ctx, func() error { return target.Get(ctx, client.ObjectKey{Name: name}, ns) }); err != nil {
			if gone(err) {
				continue
			}
			return deleted, fmt.Errorf("rolling back the target: reading namespace %s: %w", name, err)
		}
		if !hasManager(ns, FieldOwner(operation)) || ns.GetDeletionTimestamp() != nil {
			continue
		}
		ok, err := deleteNamespace(ctx, target, ts, graph.ObjectRef{GVK: namespaceGVK, Name: name, UID: ns.GetUID()})
		if err != nil {
			return deleted, fmt.Errorf("rolling back the target: deleting namespace %s: %w", name, err)
		}
		if ok {
			deleted++
		}
	}
	logger.V(1).Info("rolled back the target", "deleted", deleted)
	return deleted, nil
}

// ownCopy returns the target's object of o's name, at the version the
// target stores its kind at (see versions.go), when it is this operation's
// copy.
func ownCopy(ctx context.Context, target client.Reader, plan *graph.Plan, o *graph.Object, operation string, copies map[types.UID]bool) (graph.ObjectRef, bool, error) {
	gvk := plan.TargetGVK(o.GVK)
	copied := metadataObject(gvk, o.Namespace, o.Name)
	if err := retryTransient(ctx, func() error { return target.Get(ctx, o.Key(), copied) }); err != nil {
		if gone(err) {
			return graph.ObjectRef{}, false, nil
		}
		return graph.ObjectRef{}, false, fmt.Errorf("reading %s in the target: %w", o.ObjectRef, err)
	}
	if !IsCopyOf(copied, operation, copies) {
		return graph.ObjectRef{}, false, nil
	}
	return graph.ObjectRef{GVK: gvk, Namespace: o.Namespace, Name: o.Name, UID: copied.GetUID()}, true, nil
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
	err := retryTransient(ctx, func() error { return c.Delete(ctx, obj, client.Preconditions{UID: &ref.UID}) })
	if gone(err) {
		return false, nil
	}
	return err == nil, err
}
