package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/internal/graph"
)

// DeleteResult counts what a DeleteGroup did.
type DeleteResult struct {
	// Deleted is how many objects this call deleted.
	Deleted int
	// Gone is how many were already gone (deleted before a crash, or
	// replaced by another object of the same name, which is left alone).
	Gone int
	// Kept is how many objects of the group stay in the source by plan.
	Kept int
}

// DeleteGroup deletes from the source the objects of one group that the plan
// deletes, with at most Options.Concurrency requests in flight. Run the
// groups in reverse order, so that no object goes before what depends on it.
func DeleteGroup(ctx context.Context, source client.Client, plan *graph.Plan, group int, opts Options) (DeleteResult, error) {
	if group < 0 || group >= len(plan.Groups) {
		return DeleteResult{}, fmt.Errorf("deleting group %d: the plan has %d groups", group+1, len(plan.Groups))
	}
	var toDelete []*graph.Object
	result := DeleteResult{}
	for _, o := range plan.Groups[group] {
		if o.Delete {
			toDelete = append(toDelete, o)
		} else {
			result.Kept++
		}
	}
	logger := log.FromContext(ctx).WithValues("group", group+1, "objects", len(toDelete))
	logger.V(1).Info("deleting group from the source")

	var mu sync.Mutex
	err := forEach(ctx, toDelete, opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
		deleted, err := deleteForMove(ctx, source, o)
		if err != nil {
			return fmt.Errorf("deleting %s from the source: %w", o.ObjectRef, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if deleted {
			result.Deleted++
		} else {
			result.Gone++
		}
		return nil
	})
	if err != nil {
		return result, fmt.Errorf("deleting group %d from the source: %w", group+1, err)
	}
	logger.V(1).Info("deleted group from the source", "deleted", result.Deleted, "gone", result.Gone, "kept", result.Kept)
	return result, nil
}

// deleteForMove deletes one object the way a move does.
//
// An object with finalizers gets one patch that adds the delete-for-move
// annotation (so that providers do not tear down what the object
// represents) and drops the finalizers (no controller is running to remove
// them), then the DELETE removes the object at once. Doing both in one patch
// before the DELETE, rather than annotate, delete, then drop finalizers as
// clusterctl does, saves a request and a finalizer round trip per object.
//
// An object that had no finalizers when the plan read it is deleted by the
// DELETE alone, on condition that it is still at the resourceVersion the
// plan read: it then disappears in that request, so no controller (they are
// all stopped) and no admission webhook (bypassed) could ever see it being
// deleted, and the annotation would tell no one anything. That saves the
// patch, the costlier half of a deletion, for about half of a fleet's
// objects (Secrets, ConfigMaps, templates, bootstrap configs). An object
// changed since it was read (a finalizer added) fails the condition and
// goes the long way.
//
// Every request names the object's UID, so an object created since with the
// same name is never touched. It returns false when the object was already
// gone.
func deleteForMove(ctx context.Context, c client.Client, o *graph.Object) (bool, error) {
	ref := o.ObjectRef
	obj := metadataObject(ref.GVK, ref.Namespace, ref.Name)
	if !o.Finalizers && o.ResourceVersion != "" {
		err := retryTransient(ctx, func() error {
			return c.Delete(ctx, obj, client.Preconditions{UID: &ref.UID, ResourceVersion: &o.ResourceVersion})
		})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsConflict(err):
			return false, err
		}
		// Conflict: replaced or changed since the plan read it; the patch
		// below tells which, and handles both.
	}
	patch, err := deletionPatch(ref.UID)
	if err != nil {
		return false, err
	}
	err = retryTransient(ctx, func() error { return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)) })
	if gone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("preparing for deletion: %w", err)
	}
	err = retryTransient(ctx, func() error {
		return c.Delete(ctx, obj, client.Preconditions{UID: &ref.UID})
	})
	if gone(err) {
		return false, nil
	}
	return err == nil, err
}

// deletionPatch is the merge patch that prepares the object with UID uid
// for its DELETE: the delete-for-move annotation on, its finalizers off.
func deletionPatch(uid types.UID) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": map[string]any{graph.DeleteForMoveAnnotation: ""},
		"finalizers":  nil,
	}})
}

// gone reports whether a request on an object named by UID failed because
// that object no longer exists: NotFound, or a UID that no longer matches
// (Conflict for a DELETE precondition, Invalid for a patch of metadata.uid).
func gone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err) || uidMismatch(err)
}

// uidMismatch reports whether a patch failed because the object's UID is
// not the one the patch names: the object was replaced.
func uidMismatch(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

func metadataObject(gvk schema.GroupVersionKind, namespace, name string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}
