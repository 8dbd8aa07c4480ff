package move

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// Blockers returns the objects of the plan that carry the block-move
// annotation now. It lists the plan's kinds in the plan's namespaces rather
// than reading the objects one by one, so it costs a few requests however
// large the plan, and it also sees annotations added since the plan was
// made.
func Blockers(ctx context.Context, c client.Reader, plan *graph.Plan) ([]graph.ObjectRef, error) {
	namespaces := map[schema.GroupVersionKind][]string{}
	for _, o := range plan.Objects() {
		if !slices.Contains(namespaces[o.GVK], o.Namespace) {
			namespaces[o.GVK] = append(namespaces[o.GVK], o.Namespace)
		}
	}
	var blockers []graph.ObjectRef
	gvks := make([]schema.GroupVersionKind, 0, len(namespaces))
	for gvk := range namespaces {
		gvks = append(gvks, gvk)
	}
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(graph.KindString(a.GroupKind()), graph.KindString(b.GroupKind()))
	})
	for _, gvk := range gvks {
		nss := namespaces[gvk]
		slices.Sort(nss)
		for _, ns := range nss {
			var opts []client.ListOption
			if ns != "" {
				opts = append(opts, client.InNamespace(ns))
			}
			err := listMetadata(ctx, c, gvk, opts, func(obj client.Object) error {
				if _, blocked := obj.GetAnnotations()[graph.BlockMoveAnnotation]; !blocked {
					return nil
				}
				if o, moves := plan.Object(obj.GetUID()); moves {
					blockers = append(blockers, o.ObjectRef)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("listing %s%s for the %s annotation: %w", graph.KindString(gvk.GroupKind()), inNamespace(ns), graph.BlockMoveAnnotation, err)
			}
		}
	}
	return blockers, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}
