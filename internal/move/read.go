package move

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// readAhead is how many objects ReadGroup reads ahead of the one it hands
// over: the reads (a list's next page, GETs of objects read one by one)
// overlap with what the caller does with each object (a backup encrypts
// and writes it), instead of waiting for it. It bounds what is held
// besides the page being listed; at most DefaultConcurrency of the reads
// are GETs in flight.
const readAhead = 32

// ReadGroup reads a group of the plan from the source as a copy reads it
// (listed where the group holds many of a kind in a namespace, one by one
// otherwise; see sources) and calls each with every object as the source
// serves it, status and managed fields included, one at a time and in the
// order sources yields them: memory holds a page and up to readAhead
// objects read ahead, never the group. A backup writes a plan with it, so
// that what an archive holds is read exactly as what a move copies.
//
// An object gone from the source, or replaced under its name, is a
// *VanishedError: the plan no longer describes the source.
func ReadGroup(ctx context.Context, source client.Reader, plan *graph.Plan, group int, each func(*graph.Object, *unstructured.Unstructured) error) error {
	c := &Copier{source: source, plan: plan}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := make(chan chan readResult, readAhead)
	gets := make(chan struct{}, DefaultConcurrency) // GETs in flight
	go func() {
		defer close(pending)
		for item := range c.sources(ctx, plan.Groups[group]) {
			result := make(chan readResult, 1)
			select {
			case pending <- result:
			case <-ctx.Done():
				return
			}
			if item.source != nil {
				result <- c.read(ctx, item)
				continue
			}
			select {
			case gets <- struct{}{}:
			case <-ctx.Done():
				result <- readResult{err: ctx.Err()}
				return
			}
			go func() {
				defer func() { <-gets }()
				result <- c.read(ctx, item)
			}()
		}
	}()
	for result := range pending {
		r := <-result
		if r.err != nil {
			return fmt.Errorf("reading group %d of the source: %w", group+1, r.err)
		}
		if err := each(r.object, r.source); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// readResult is one object ReadGroup read, or why it could not.
type readResult struct {
	object *graph.Object
	source *unstructured.Unstructured
	err    error
}

func (c *Copier) read(ctx context.Context, item sourceItem) readResult {
	src, err := c.readSource(ctx, item.object, item.source)
	return readResult{object: item.object, source: src, err: err}
}
