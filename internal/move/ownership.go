package move

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// FieldOwner is the field manager of every write an operation makes in the
// target. The create of a copy records it in the copy's managed fields, and
// it stays there until the source's managed fields replace it
// (restoreManagedFields); on the namespaces the move created it stays for
// good.
func FieldOwner(operation string) string {
	return "move.cluster.x-k8s.io/" + operation
}

// IsCopyOf reports whether existing, found in the target under the name of
// a moved object, is a copy this operation made, without any mark written
// on it for the purpose: it holds an entry of the operation's field manager
// (its managed fields are not restored yet), or its UID is among the copies
// the operation recorded (see Copier.OnCopied), which it does before it
// restores them. Anything else was there before, or made by somebody else.
func IsCopyOf(existing metav1.Object, operation string, copies map[types.UID]bool) bool {
	return hasManager(existing, FieldOwner(operation)) || copies[existing.GetUID()]
}

func hasManager(obj metav1.Object, manager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager {
			return true
		}
	}
	return false
}

// copyAnnotations returns the annotations a copy of an object carries: all
// but where an earlier move copied the source object, which concerns the
// source object alone.
func copyAnnotations(a map[string]string) map[string]string {
	out := maps.Clone(a)
	delete(out, movev1alpha1.CopiedToAnnotation)
	return out
}
