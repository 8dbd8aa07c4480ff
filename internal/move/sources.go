package move

import (
	"context"
	"iter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/internal/graph"
)

// sourceItem is an object to copy, with its source copy when a list
// already read it (nil when it is to be read on its own).
type sourceItem struct {
	object *graph.Object
	source *unstructured.Unstructured
}

// listThreshold decides how the objects of a group are read from the
// source. Objects of one kind and namespace are listed, page by page, when
// the group holds at least listMinimum of them and at least a tenth of the
// plan's objects of that kind and namespace: one LIST then replaces many
// GETs while transferring at most ten times what is copied. The others are
// read one by one.
//
// Why a tenth: a kind spreads over several groups (a fleet's Secrets sit
// at five depths, its Machines at two or three), so each group holds only a
// part of it. With a third, as before, most of a fleet's Secrets, Machines
// and bootstrap configs were read one by one: 0.6 GET per moved object in
// `make bench`. A GET costs the API server a request's overhead, several
// times the cost of one more object in a page, so reading a few times what
// is copied is still the cheaper way, and it keeps to a page in memory.
const (
	listMinimum  = 4
	listFraction = 10
)

// fullPageSize is the limit of the copy's LIST requests, which read whole
// objects. A page is the largest thing the copy holds: decoded, a page of
// 500 Cluster API objects took 17 MiB, more than half the operator's live
// heap at its peak in `make bench`. A page of 100 takes a fifth
// of that, for one more LIST request per 100 objects listed, against the
// one or two writes each copied object costs.
const fullPageSize = 100

// KindNamespace is a kind in a namespace ("" for every namespace, or for
// a cluster-scoped kind): what one list reads.
type KindNamespace struct {
	GVK       schema.GroupVersionKind
	Namespace string
}

// sources yields the objects of a group with their source copies, reading
// them as the copy consumes them, so that memory holds a page and the
// objects in flight, never a whole group.
func (c *Copier) sources(ctx context.Context, objects []*graph.Object) iter.Seq[sourceItem] {
	return func(yield func(sourceItem) bool) {
		planCounts := c.kindCounts()
		inGroup, pairs := ByKindNamespace(objects)
		for _, k := range pairs {
			members := inGroup[k]
			if len(members) < listMinimum || len(members)*listFraction < planCounts[k] {
				continue
			}
			if !c.yieldListed(ctx, k, members, yield) {
				return
			}
		}
		// Objects not listed, or that a list did not return (their GET
		// reports why), in the group's order.
		for _, o := range objects {
			if _, pending := inGroup[KindNamespace{o.GVK, o.Namespace}][o.UID]; pending {
				if !yield(sourceItem{object: o}) {
					return
				}
			}
		}
	}
}

// kindCounts returns how many of the plan's objects each kind and
// namespace holds, counted once per Copier: every group's choice between a
// list and GETs weighs its objects against them.
func (c *Copier) kindCounts() map[KindNamespace]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.planCounts == nil {
		c.planCounts = map[KindNamespace]int{}
		for _, o := range c.plan.Objects() {
			c.planCounts[KindNamespace{o.GVK, o.Namespace}]++
		}
	}
	return c.planCounts
}

// ByKindNamespace indexes objects by kind and namespace, the unit a list
// reads, and by UID, to match what a list returns; pairs are the kinds and
// namespaces in the order the objects first name them, so that the reads
// keep to that order.
func ByKindNamespace(objects []*graph.Object) (inGroup map[KindNamespace]map[types.UID]*graph.Object, pairs []KindNamespace) {
	inGroup = map[KindNamespace]map[types.UID]*graph.Object{}
	for _, o := range objects {
		k := KindNamespace{o.GVK, o.Namespace}
		if inGroup[k] == nil {
			inGroup[k] = map[types.UID]*graph.Object{}
			pairs = append(pairs, k)
		}
		inGroup[k][o.UID] = o
	}
	return inGroup, pairs
}

// yieldListed lists the objects of one kind and namespace and yields
// those among members, removing each from members as it is yielded, so
// that what remains is read one by one afterwards. It returns false when
// the consumer stopped; a list that fails is logged, what it did not
// deliver left in members.
func (c *Copier) yieldListed(ctx context.Context, k KindNamespace, members map[types.UID]*graph.Object, yield func(sourceItem) bool) bool {
	stopped := false
	err := listFull(ctx, c.source, k.GVK, k.Namespace, func(u *unstructured.Unstructured) bool {
		o, ok := members[u.GetUID()]
		if !ok {
			return true
		}
		delete(members, u.GetUID())
		if !yield(sourceItem{object: o, source: u}) {
			stopped = true
		}
		return !stopped
	})
	if stopped {
		return false
	}
	if err != nil {
		// Read whatever the list did not deliver one by one; a
		// source that is really unreachable fails there, per object.
		log.FromContext(ctx).V(1).Info("listing the source failed, reading objects one by one",
			"kind", graph.KindString(k.GVK.GroupKind()), "namespace", k.Namespace, "error", err.Error())
	}
	return true
}

// listFull lists the objects of a kind in a namespace ("" for all, or for a
// cluster-scoped kind) in full, page by page, and calls each for every
// object until it returns false.
//
// It reads the next page only when each has taken the last one, not through
// listing.Each: the pager reads a page ahead while one is handled, and each
// here hands objects to the copy, which can hold a page for as long as it
// takes to copy it, so memory would hold two pages of full objects instead
// of one. An expired continue token ends the list with an error; sources
// then reads one by one what the list did not deliver.
func listFull(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string, each func(*unstructured.Unstructured) bool) error {
	token := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.Limit(fullPageSize), client.Continue(token)}
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := retryTransient(ctx, func() error { return c.List(ctx, list, opts...) }); err != nil {
			return err
		}
		for i := range list.Items {
			item := &list.Items[i]
			// An item says its version: an archive serves each object in
			// the version it was written at, whatever the list asked
			// (a copy converts it from there).
			if item.GetAPIVersion() == "" {
				item.SetGroupVersionKind(gvk)
			}
			if !each(item) {
				return nil
			}
		}
		token = list.GetContinue()
		if token == "" {
			return nil
		}
	}
}
