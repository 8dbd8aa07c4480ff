// Package listing reads every object of a kind, page by page, with
// client-go's pager, and calls a function for each. It starts the listing
// over when the API server has expired its continue token, calling the
// function only for objects it has not seen yet.
//
// It holds at most the page being handled and the next one, which the
// pager reads meanwhile; it never caches, and never asks for the whole list
// in one request (the pager's fallback for an expired token, which would
// hold a whole kind in memory).
package listing

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxRestarts is how many times a listing starts over after its continue
// token expired. A token expires when the listing outlasts the API
// server's compaction window (five minutes by default); a listing that
// keeps doing so is too slow for any number of tries.
const MaxRestarts = 3

// ListFunc reads one page into list; a controller-runtime client's List, or
// one that retries it.
type ListFunc func(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error

// Request says what to list.
type Request struct {
	// List reads a page.
	List ListFunc
	// NewList returns an empty list of the kind to read, as metadata or in
	// full.
	NewList func() client.ObjectList
	// PageSize is the limit of each request.
	PageSize int64
	// Options narrow the listing (namespace, selectors); Limit and Continue
	// are set here.
	Options []client.ListOption
}

// Each calls each for every object the request lists, once per object even
// when the listing started over, and stops at the first error it returns.
func Each(ctx context.Context, r Request, each func(client.Object) error) error {
	p := &pager.ListPager{
		PageSize: r.PageSize,
		PageFn: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := r.NewList()
			listOpts := append(slices.Clone(r.Options), client.Limit(opts.Limit), client.Continue(opts.Continue))
			if err := r.List(ctx, list, listOpts...); err != nil {
				return nil, err
			}
			return list, nil
		},
		// One page read ahead while one is handled: a buffer would
		// only hold more pages in memory.
		PageBufferSize: 0,
	}
	// The UIDs handled, so that a listing that starts over skips them.
	seen := map[types.UID]bool{}
	var eachErr error
	for restarts := 0; ; restarts++ {
		err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
			obj, ok := o.(client.Object)
			if !ok {
				return fmt.Errorf("unexpected list item %T", o)
			}
			if seen[obj.GetUID()] {
				return nil
			}
			seen[obj.GetUID()] = true
			if err := each(obj); err != nil {
				eachErr = err
				return err
			}
			return nil
		})
		// An error of each's is its own, never a reason to start over.
		if err == nil || eachErr != nil || !apierrors.IsResourceExpired(err) || restarts == MaxRestarts {
			return err
		}
	}
}
