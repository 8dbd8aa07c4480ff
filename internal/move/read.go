package move

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// ReadGroup reads a group of the plan from the source as a copy reads it
// (listed where the group holds many of a kind in a namespace, one by one
// otherwise; see sources) and calls each with every object as the source
// serves it, status and managed fields included, one at a time: memory
// holds a page, never the group. A backup writes a plan with it, so that
// what an archive holds is read exactly as what a move copies.
//
// An object gone from the source, or replaced under its name, is a
// *VanishedError: the plan no longer describes the source.
func ReadGroup(ctx context.Context, source client.Reader, plan *graph.Plan, group int, each func(*graph.Object, *unstructured.Unstructured) error) error {
	c := &Copier{source: source, plan: plan}
	for item := range c.sources(ctx, plan.Groups[group]) {
		src, err := c.readSource(ctx, item.object, item.source)
		if err != nil {
			return fmt.Errorf("reading group %d of the source: %w", group+1, err)
		}
		if err := each(item.object, src); err != nil {
			return err
		}
	}
	return nil
}
