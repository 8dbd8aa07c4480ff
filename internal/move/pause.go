package move

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// Pause pauses the plan's Clusters (spec.paused, as clusterctl does) and
// ClusterClasses (the paused annotation, which is all they have), and
// records on each, in the same patch, that this operation paused it
// (PausedByAnnotation), so that Unpause later undoes only its own pauses.
// An object already paused, by this operation or by someone else, is left
// as it is: one paused by someone else moves paused and stays paused, since
// Unpause undoes only this operation's pauses.
func Pause(ctx context.Context, c client.Client, plan *graph.Plan, operation string, opts Options) error {
	objects := plan.OfKind(graph.ClusterGroupKind, graph.ClusterClassGroupKind)
	err := forEach(ctx, objects, opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
		return pause(ctx, c, o.ObjectRef, operation)
	})
	if err != nil {
		return fmt.Errorf("pausing Clusters and ClusterClasses: %w", err)
	}
	return nil
}

func pause(ctx context.Context, c client.Client, ref graph.ObjectRef, operation string) error {
	// A conflict means the object changed between the read and the patch;
	// read it again and decide again, up to six times in all.
	return retry.RetryOnConflict(wait.Backoff{Steps: 6}, func() error {
		return pauseOnce(ctx, c, ref, operation)
	})
}

// pauseOnce reads the object and, unless it is paused already, pauses it
// with a patch that fails with a conflict if the object changed since.
func pauseOnce(ctx context.Context, c client.Client, ref graph.ObjectRef, operation string) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(ref.GVK)
	if err := retryTransient(ctx, func() error { return c.Get(ctx, ref.Key(), obj) }); err != nil {
		return fmt.Errorf("reading %s: %w", ref, err)
	}
	isCluster := ref.GroupKind() == graph.ClusterGroupKind
	specPaused, _, _ := unstructured.NestedBool(obj.Object, "spec", "paused")
	_, annotated := obj.GetAnnotations()[graph.PausedAnnotation]
	paused := annotated || (isCluster && specPaused)

	if paused {
		return nil
	}

	// The resourceVersion makes the patch fail if someone paused (or
	// otherwise changed) the object since it was read.
	metadata := map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"annotations":     map[string]any{movev1alpha1.PausedByAnnotation: operation},
	}
	patch := map[string]any{"metadata": metadata}
	if isCluster {
		patch["spec"] = map[string]any{"paused": true}
	} else {
		metadata["annotations"].(map[string]any)[graph.PausedAnnotation] = ""
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	err = retryTransient(ctx, func() error { return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)) })
	if err != nil {
		return fmt.Errorf("pausing %s: %w", ref, err)
	}
	return nil
}

// Unpause unpauses every Cluster and ClusterClass in the cluster that this
// operation paused (its PausedByAnnotation), in one patch each that also
// drops the annotation; pauses made by anyone else are left alone. It
// finds them by listing, not from a plan, because after the move the
// target's objects are the ones to unpause and the source's are gone.
// It returns how many it unpaused.
func Unpause(ctx context.Context, c client.Client, ts *graph.Types, operation string, opts Options) (int, error) {
	var toUnpause []graph.ObjectRef
	for _, gk := range []schema.GroupKind{graph.ClusterGroupKind, graph.ClusterClassGroupKind} {
		typ, ok := ts.Lookup(gk)
		if !ok {
			continue
		}
		err := listMetadata(ctx, c, typ.GVK, nil, func(obj client.Object) error {
			if obj.GetAnnotations()[movev1alpha1.PausedByAnnotation] == operation {
				toUnpause = append(toUnpause, graph.ObjectRef{GVK: typ.GVK, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()})
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("listing %s to unpause: %w", graph.KindString(gk), err)
		}
	}
	err := forEach(ctx, toUnpause, opts.concurrency(), func(ctx context.Context, ref graph.ObjectRef) error {
		metadata := map[string]any{
			"uid":         ref.UID,
			"annotations": map[string]any{movev1alpha1.PausedByAnnotation: nil},
		}
		patch := map[string]any{"metadata": metadata}
		if ref.GroupKind() == graph.ClusterGroupKind {
			// Drop the field rather than set false, as clusterctl does, so
			// that the operator does not become a manager of spec.paused.
			patch["spec"] = map[string]any{"paused": nil}
		} else {
			metadata["annotations"].(map[string]any)[graph.PausedAnnotation] = nil
		}
		body, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		obj := metadataObject(ref.GVK, ref.Namespace, ref.Name)
		err = retryTransient(ctx, func() error { return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)) })
		if err != nil && !gone(err) {
			return fmt.Errorf("unpausing %s: %w", ref, err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("unpausing Clusters and ClusterClasses: %w", err)
	}
	return len(toUnpause), nil
}
