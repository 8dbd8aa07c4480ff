package move

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/graph"
)

// A copy is written, read and deleted in the target at the version the
// target stores its kind at (graph.Plan.TargetGVK), never at another: the
// target's API server converts a request at any other version through the
// kind's conversion webhook, served by the controllers the move stops. The
// source is read at the version it stores the kind at (the plan's GVK),
// for the same reason. Where the two differ (an older Cluster API moved
// into a newer one, or a newer one moved back into an older one), the
// object is converted in the operator, with Cluster API's own code
// (package convert), between the read and the create.
//
// The way back is the same walk. What differs is decided before it starts:
// Validating refuses every object whose spec or metadata hold what the
// older version cannot (preflight.CheckGoingBack), so that Cluster API's
// conversion loses nothing of them but status fields the older
// controllers recompute.

// toTargetVersion returns src, an object of o as the source serves it, at
// the version the target stores its kind at: src itself when it is at that
// version already, Cluster API's conversion of it otherwise (src is left
// as it is). The version src is at is the one it says, not the plan's:
// an archive serves an object in the version it was written at.
func (c *Copier) toTargetVersion(ctx context.Context, o *graph.Object, src *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	to := c.plan.TargetGVK(o.GVK)
	from := src.GroupVersionKind()
	if from == to {
		return src, nil
	}
	// The way up asks no reference versions: a newer version's reference
	// names a group and kind, and the contract decides the version. The
	// way back asks them of the target (referenceVersion).
	converted, err := convert.Convert(ctx, src, to.Version, c.referenceVersion)
	if err != nil {
		return nil, fmt.Errorf("converting %s from %s to %s, the version the target stores it at: %w", o.ObjectRef, from.Version, to.Version, err)
	}
	if version.CompareKubeAwareVersionStrings(to.Version, from.Version) < 0 {
		dropConversionData(converted)
	}
	c.retargetReferences(converted)
	return converted, nil
}

// retargetReferences makes every reference in u's spec that names its
// kind's API version (a map holding apiVersion and kind: a ClusterClass's
// templateRefs and the selectors of its patches, which its webhook wants
// equal, a v1beta1 infrastructureRef or configRef) name the version the
// target stores that kind at, when the move converts that kind;
// references to other kinds are left as they are. Cluster API's
// conversion keeps such a version as the source had it, which in the
// target names a version the kind is not stored at: the target's
// controllers would read the kind through its conversion webhook, and
// Cluster API v1.14's topology controller, reading a ClusterClass's
// templates at v1beta1, computes a control plane whose kubeadm arguments
// differ from the ones it owns and rolls the control plane out (found with
// a v1.10 ClusterClass-based cluster moved into v1.14, test/upgradebymoving).
// An upgrade in place leaves these references to the user; a move writes
// them as the target's controllers expect them, as the owner references.
func (c *Copier) retargetReferences(u *unstructured.Unstructured) {
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		c.retargetIn(spec)
	}
}

func (c *Copier) retargetIn(v any) {
	switch v := v.(type) {
	case map[string]any:
		apiVersion, isRef := v["apiVersion"].(string)
		kind, hasKind := v["kind"].(string)
		if isRef && hasKind {
			if gv, err := schema.ParseGroupVersion(apiVersion); err == nil && c.plan.Converts(gv.WithKind(kind)) {
				v["apiVersion"] = c.plan.TargetGVK(gv.WithKind(kind)).GroupVersion().String()
			}
		}
		for _, e := range v {
			c.retargetIn(e)
		}
	case []any:
		for _, e := range v {
			c.retargetIn(e)
		}
	}
}

// dropConversionData removes from an object converted back the annotation
// where Cluster API's conversion keeps the whole newer object
// (convert.DataAnnotation), for its own conversion up to restore what the
// older version has no field for. The older release's controllers never
// read it. Validating let through only objects whose spec and metadata the
// older version holds whole (preflight.CheckGoingBack), so all it could
// still restore is status: values the older controllers do not maintain,
// which a later conversion up (an upgrade in place, a move forward) would
// bring back stale over what those controllers observed since. It would
// also double the size of every object. Without it, a conversion up makes
// the object from its v1beta1 fields alone, as for any object the older
// release wrote.
func dropConversionData(u *unstructured.Unstructured) {
	annotations := u.GetAnnotations()
	if _, ok := annotations[convert.DataAnnotation]; !ok {
		return
	}
	delete(annotations, convert.DataAnnotation)
	if len(annotations) == 0 {
		annotations = nil
	}
	u.SetAnnotations(annotations)
}

// ReferencesIn gives the Copier the target's kinds (graph.DiscoverTypes
// of the target): an object converted back to an older version names in
// its references the API version of each referenced kind, which the newer
// version leaves to the contract, and the version named is the one the
// target stores that kind at, as Cluster API's webhook answers from the
// CRDs of the cluster it runs in. Without them, a conversion back fails.
func (c *Copier) ReferencesIn(kinds *graph.Types) *Copier {
	c.targetKinds = kinds
	return c
}

// referenceVersion answers, for a conversion back (convert.ReferenceVersions),
// the API version the target stores a referenced kind at.
func (c *Copier) referenceVersion(_ context.Context, gk schema.GroupKind) (string, error) {
	if c.targetKinds == nil {
		return "", fmt.Errorf("the API version of the referenced kind %s in the target is needed to convert back, and the target's kinds were not given", graph.KindString(gk))
	}
	t, ok := c.targetKinds.Lookup(gk)
	if !ok {
		return "", fmt.Errorf("a moved object references %s, which the target does not serve: install there the provider that serves it", graph.KindString(gk))
	}
	return t.GVK.GroupVersion().String(), nil
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
