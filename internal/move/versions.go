package move

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/graph"
)

// A copy is written, read and deleted in the target at the version the
// target stores its kind at (graph.Plan.TargetGVK), never at another: the
// target's API server converts a request at any other version through the
// kind's conversion webhook, served by the controllers the move stops. The
// source is read at the version it stores the kind at (the plan's GVK),
// for the same reason. Where the two differ (an older Cluster API moved
// into a newer one), the object is converted in the operator, with Cluster
// API's own code (package convert), between the read and the create.

// toTargetVersion returns src, an object of o as the source serves it, at
// the version the target stores its kind at: src itself when it is at that
// version already, Cluster API's conversion of it otherwise (src is left
// as it is). The version src is at is the one it says, not the plan's:
// an archive serves an object in the version it was written at.
func (c *Copier) toTargetVersion(ctx context.Context, o *graph.Object, src *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	to := c.plan.TargetGVK(o.GVK)
	if src.GroupVersionKind() == to {
		return src, nil
	}
	// The way up asks no reference versions: a newer version's reference
	// names a group and kind, and the contract decides the version.
	converted, err := convert.Convert(ctx, src, to.Version, nil)
	if err != nil {
		return nil, fmt.Errorf("converting %s from %s to %s, the version the target stores it at: %w", o.ObjectRef, src.GroupVersionKind().Version, to.Version, err)
	}
	return converted, nil
}

// ownerAPIVersion returns the apiVersion the copy's owner reference to a
// moved owner names: the version the target stores the owner's kind at when
// the move converts that kind, as the target's controllers write their own
// references (the garbage collector then resolves the owner at its storage
// version, with no conversion webhook to ask); the reference's own version
// otherwise, as the source had it.
func (c *Copier) ownerAPIVersion(owner *graph.Object, ref metav1.OwnerReference) string {
	if !c.plan.Converts(owner.GVK) {
		return ref.APIVersion
	}
	return c.plan.TargetGVK(owner.GVK).GroupVersion().String()
}

// managedFieldsAt returns the entries of a source's managed fields written
// at version (a "group/version") and drops the others. The target's API
// server, for any write to an object whose managed fields hold an entry at
// another version than the object's, converts the object to that version
// to compare it field by field; with the conversion webhook stopped, that
// fails, and the API server then drops every managed field of the object
// without a word. A converted object's source entries are all at the older
// version, so its copy keeps none of them (see restoreManagedFields); an
// object of a kind stored at one version keeps every entry but those a
// manager wrote at a version since superseded.
func managedFieldsAt(entries []metav1.ManagedFieldsEntry, version string) []metav1.ManagedFieldsEntry {
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		if e.APIVersion == version {
			out = append(out, e)
		}
	}
	return out
}
