package move

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	movev1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// FieldOwner is the field manager of every write an operation makes in the
// target. The create of a copy records it in the copy's managed fields; it
// is what tells the copy apart from an object that was already there until
// the source's managed fields replace it (restoreManagedFields), and on the
// namespaces the move created, for good.
func FieldOwner(operation string) string {
	return "move.cluster.x-k8s.io/" + operation
}

// original is what the ownership test needs of a source object, taken
// before the copy is prepared from it.
type original struct {
	managedFields []metav1.ManagedFieldsEntry
	provenance    Provenance
	hasProvenance bool
	content       string
	labels        map[string]string
	annotations   map[string]string
}

func originalOf(src *unstructured.Unstructured) original {
	o := original{
		managedFields: src.GetManagedFields(),
		content:       ContentHash(src),
		labels:        src.GetLabels(),
		annotations:   copyAnnotations(src.GetAnnotations()),
	}
	o.provenance, o.hasProvenance = ProvenanceOf(src)
	return o
}

// copyAnnotations returns the annotations a copy of an object carries: all
// but where an earlier move copied the source object, which concerns the
// source object alone.
func copyAnnotations(a map[string]string) map[string]string {
	out := maps.Clone(a)
	delete(out, movev1.CopiedToAnnotation)
	return out
}

// isOurCopy reports whether existing, found in the target under the name of
// a source object, is the copy this operation made of it, without any mark
// written for the purpose:
//
//   - before its managed fields are restored, the copy holds an entry of the
//     operation's field manager (the create wrote it);
//   - once restored, it holds the source's entries (manager, operation,
//     subresource, API version and time of each, in order; the field sets
//     differ only by the owner UIDs the copy rewrote, and by entries the
//     rewrite emptied, which the API server drops), and the source's
//     content, labels and annotations.
//
// Anything else was made otherwise: by another writer, or by an earlier
// move, whose copy the source object records (CopiedToAnnotation). A twin
// made elsewhere with the same content by the same managers in the same
// seconds would pass; a move checks the target for objects under the moved
// names when it records its plan, so such a twin would have to appear in the
// target while the move copies.
func isOurCopy(existing *unstructured.Unstructured, src original, operation string) bool {
	if hasManager(existing, FieldOwner(operation)) {
		return true
	}
	if src.hasProvenance && src.provenance.Copy == existing.GetUID() {
		return false
	}
	return sameManagers(existing.GetManagedFields(), src.managedFields) &&
		ContentHash(existing) == src.content &&
		maps.Equal(existing.GetLabels(), src.labels) &&
		maps.Equal(existing.GetAnnotations(), src.annotations)
}

func hasManager(obj metav1.Object, manager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager {
			return true
		}
	}
	return false
}

// sameManagers reports whether copied is source's list of entries, but for
// entries the copy dropped: a non-empty subsequence, compared by everything
// but the field sets.
func sameManagers(copied, source []metav1.ManagedFieldsEntry) bool {
	if len(copied) == 0 {
		return false
	}
	i := 0
	for _, s := range source {
		if i < len(copied) && sameEntry(copied[i], s) {
			i++
		}
	}
	return i == len(copied)
}

func sameEntry(a, b metav1.ManagedFieldsEntry) bool {
	return a.Manager == b.Manager && a.Operation == b.Operation && a.Subresource == b.Subresource &&
		a.APIVersion == b.APIVersion && a.Time.Equal(b.Time)
}
