package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
)

// CheckCRDs fails, naming every CRD concerned, when a kind to move is not
// installed in the target, is stored there at another version than in the
// source, or holds objects stored at more than its storage version in either
// cluster. Objects are read and written at the storage version only, so no
// conversion webhook is needed while the providers are down; a second stored
// version would mean objects a conversion webhook must still rewrite.
func CheckCRDs(source, target *graph.Types) error {
	var problems []string
	for _, st := range source.All() {
		if st.GVK.Group == "" {
			continue // Secrets and ConfigMaps
		}
		gk := st.GVK.GroupKind()
		tt, ok := target.Lookup(gk)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (%s) is not installed in the target: install the same provider version there first", st.Resource, graph.KindString(gk)))
			continue
		case tt.GVK.Version != st.GVK.Version:
			problems = append(problems, fmt.Sprintf("%s is stored at %s in the source and %s in the target: install the same provider version in both", st.Resource, st.GVK.Version, tt.GVK.Version))
		}
		for _, c := range []struct {
			which string
			t     *graph.Type
		}{{"source", st}, {"target", tt}} {
			if extra := otherVersions(c.t); len(extra) > 0 {
				problems = append(problems, fmt.Sprintf("%s in the %s still has objects stored at %s besides %s: migrate them to the storage version and trim status.storedVersions first",
					c.t.Resource, c.which, strings.Join(extra, ", "), c.t.GVK.Version))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the CRDs do not allow a move: %s", strings.Join(problems, "; "))
}

func otherVersions(t *graph.Type) []string {
	var out []string
	for _, v := range t.StoredVersions {
		if v != t.GVK.Version {
			out = append(out, v)
		}
	}
	return out
}

// InTarget is what the target holds already of a plan's objects.
type InTarget struct {
	// Conflicts are objects that exist in the target under the name of a
	// moved object and that the copy would overwrite.
	Conflicts []graph.ObjectRef
	// Found are the moved objects (by source UID) that the copy uses as
	// found: global objects and their hierarchies that the target has, and
	// the copies an earlier move made (recorded on the source object) while
	// neither side has changed since.
	Found map[types.UID]bool
}

// CheckTarget finds what the target holds already of the plan's objects:
// one LIST per kind and namespace, metadata only, and two GETs per earlier
// copy. It runs before the move writes anything, and again when the move
// records its plan, once the providers of both clusters are stopped and
// nobody but the operator can create their objects: the target is read at
// the versions it stores the kinds at (plan.TargetGVK), where no conversion
// webhook is asked.
func CheckTarget(ctx context.Context, source, target client.Reader, targetID types.UID, plan *graph.Plan) (InTarget, error) {
	out := InTarget{Found: map[types.UID]bool{}}
	wanted := map[schema.GroupVersionKind]map[client.ObjectKey]*graph.Object{}
	for _, o := range plan.Objects() {
		gvk := plan.TargetGVK(o.GVK)
		if wanted[gvk] == nil {
			wanted[gvk] = map[client.ObjectKey]*graph.Object{}
		}
		wanted[gvk][o.Key()] = o
	}
	for gvk, objs := range wanted {
		for _, ns := range namespacesOf(objs) {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := target.List(ctx, list, client.InNamespace(ns)); err != nil {
				if meta.IsNoMatchError(err) {
					break // the kind is not in the target; CheckKindVersions reports it
				}
				return InTarget{}, fmt.Errorf("listing %s in namespace %s of the target: %w", graph.KindString(gvk.GroupKind()), ns, err)
			}
			for i := range list.Items {
				o, ok := objs[client.ObjectKeyFromObject(&list.Items[i])]
				if !ok {
					continue
				}
				if o.Global || o.InGlobalHierarchy {
					out.Found[o.UID] = true
					continue
				}
				earlier, err := move.EarlierCopy(ctx, source, target, targetID, o.ObjectRef, gvk)
				if err != nil {
					return InTarget{}, err
				}
				if earlier {
					out.Found[o.UID] = true
				} else {
					out.Conflicts = append(out.Conflicts, o.ObjectRef)
				}
			}
		}
	}
	slices.SortFunc(out.Conflicts, func(a, b graph.ObjectRef) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

func namespacesOf(objs map[client.ObjectKey]*graph.Object) []string {
	seen := map[string]bool{}
	var out []string
	for k := range objs {
		if !seen[k.Namespace] {
			seen[k.Namespace] = true
			out = append(out, k.Namespace)
		}
	}
	slices.Sort(out)
	return out
}
