package move

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

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

// WaitForBlockMove waits until no object of the plan carries the block-move
// annotation, checking every interval, for as long as the context allows
// (give it the MoveOperation's blockMove timeout). On timeout the error
// names the objects still blocking.
func WaitForBlockMove(ctx context.Context, c client.Reader, plan *graph.Plan, interval time.Duration) error {
	logger := log.FromContext(ctx)
	var last []graph.ObjectRef
	timedOut := func() error {
		return fmt.Errorf("waiting for %d objects to drop the %s annotation (%s): %w",
			len(last), graph.BlockMoveAnnotation, refList(last, 10), ctx.Err())
	}
	for {
		blockers, err := Blockers(ctx, c, plan)
		if err != nil {
			if ctx.Err() != nil && last != nil {
				// The deadline fell during a check: report what blocked last.
				return timedOut()
			}
			return fmt.Errorf("waiting for objects to drop the %s annotation: %w", graph.BlockMoveAnnotation, err)
		}
		if len(blockers) == 0 {
			return nil
		}
		last = blockers
		logger.Info("waiting for objects to drop the block-move annotation", "count", len(blockers), "first", blockers[0].String())
		select {
		case <-ctx.Done():
			return timedOut()
		case <-time.After(interval):
		}
	}
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// refList names up to limit objects.
func refList(refs []graph.ObjectRef, limit int) string {
	s := ""
	for i, r := range refs {
		if i == limit {
			return s + fmt.Sprintf(", and %d more", len(refs)-limit)
		}
		if i > 0 {
			s += ", "
		}
		s += r.String()
	}
	return s
}
