package move

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// Provenance is what a completed move records on an object it copied and
// kept in the source: where the copy is, and the content both had.
type Provenance struct {
	// Target is the ID of the target cluster (its kube-system UID).
	Target types.UID
	// Copy is the copy's UID in the target.
	Copy types.UID
	// Content is ContentHash of the object when it was copied.
	Content string
}

func (p Provenance) String() string {
	return fmt.Sprintf("%s/%s/%s", p.Target, p.Copy, p.Content)
}

// ProvenanceOf reads the provenance an earlier move recorded on obj.
func ProvenanceOf(obj metav1.Object) (Provenance, bool) {
	parts := strings.Split(obj.GetAnnotations()[movev1alpha1.CopiedToAnnotation], "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Provenance{}, false
	}
	return Provenance{Target: types.UID(parts[0]), Copy: types.UID(parts[1]), Content: parts[2]}, true
}

// ContentHash digests what a copy carries of an object and what its
// controllers do not write: everything but metadata and status. Equal
// hashes on both sides mean that neither the object nor its copy changed.
func ContentHash(u *unstructured.Unstructured) string {
	content := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			content[k] = v
		}
	}
	b, _ := json.Marshal(content) // maps marshal with sorted keys: the digest is stable
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// IsEarlierCopy reports whether existing, found in the target with
// targetID, is the copy that an earlier move made of src (src records it),
// and neither has changed since: such a copy is taken as already made.
// Anything else of that name in the target is a conflict.
func IsEarlierCopy(src, existing *unstructured.Unstructured, targetID types.UID) bool {
	p, ok := ProvenanceOf(src)
	return ok && p.Target == targetID && p.Copy == existing.GetUID() &&
		ContentHash(src) == p.Content && ContentHash(existing) == p.Content
}

// EarlierCopy reports whether the target's object of ref's name is the copy
// an earlier move made of the source object, neither changed since. It
// reads the target only when the source object records a copy, at the
// version the target stores the kind at (inTarget). A copy of an object
// stored at another version in the source is never taken as unchanged:
// the content of the two versions differs.
func EarlierCopy(ctx context.Context, source, target client.Reader, targetID types.UID, ref graph.ObjectRef, inTarget schema.GroupVersionKind) (bool, error) {
	src, err := getUnstructured(ctx, source, ref)
	if err != nil {
		return false, fmt.Errorf("reading %s in the source: %w", ref, err)
	}
	if _, ok := ProvenanceOf(src); !ok {
		return false, nil
	}
	ref.GVK = inTarget
	copied, err := getUnstructured(ctx, target, ref)
	if err != nil {
		return false, fmt.Errorf("reading %s in the target: %w", ref, err)
	}
	return IsEarlierCopy(src, copied, targetID), nil
}

// RecordCopies marks, in the source, every object of the plan that the move
// copied and keeps there (its Delete is false: a shared ClusterClass, a
// global identity) with the provenance of its copy in the target, so that a
// later move of the same object takes that copy as already made. An object
// whose copy is not in the target is left as it is, and so is one that
// records this copy already (a resumed restore writes nothing twice). It
// returns how many objects it marked.
func RecordCopies(ctx context.Context, source, target client.Client, targetID types.UID, plan *graph.Plan, opts Options) (int, error) {
	var kept []*graph.Object
	for _, o := range plan.Objects() {
		if !o.Delete {
			kept = append(kept, o)
		}
	}
	var mu sync.Mutex
	marked := 0
	err := forEach(ctx, kept, opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
		copied, err := getUnstructured(ctx, target, plan.InTarget(o.ObjectRef))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		value := Provenance{Target: targetID, Copy: copied.GetUID(), Content: ContentHash(copied)}.String()
		src := &metav1.PartialObjectMetadata{}
		src.SetGroupVersionKind(o.GVK)
		if err := retryTransient(ctx, func() error { return source.Get(ctx, o.Key(), src) }); err != nil {
			if gone(err) {
				return nil
			}
			return fmt.Errorf("reading %s in the source: %w", o.ObjectRef, err)
		}
		if src.GetUID() != o.UID || src.GetAnnotations()[movev1alpha1.CopiedToAnnotation] == value {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid":         o.UID,
			"annotations": map[string]any{movev1alpha1.CopiedToAnnotation: value},
		}})
		if err != nil {
			return err
		}
		err = retryTransient(ctx, func() error { return source.Patch(ctx, src, client.RawPatch(types.MergePatchType, patch)) })
		if err != nil && !gone(err) {
			return fmt.Errorf("recording the copy of %s: %w", o.ObjectRef, err)
		}
		mu.Lock()
		marked++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recording the copies of the objects kept in the source: %w", err)
	}
	return marked, nil
}

func getUnstructured(ctx context.Context, c client.Reader, ref graph.ObjectRef) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ref.GVK)
	err := retryTransient(ctx, func() error { return c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u) })
	return u, err
}
