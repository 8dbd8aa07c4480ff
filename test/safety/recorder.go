package main

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/snapshot"
)

// What a mover writes to the objects it moves, and must: pausing, the
// delete-for-move mark, the operator's bookkeeping. Left out of the
// comparison of a copy with its original.
var (
	moverAnnotations = []string{"move.cluster.x-k8s.io/", "clusterctl.cluster.x-k8s.io/delete-for-move", "cluster.x-k8s.io/paused"}
	moverLabels      = []string{"move.cluster.x-k8s.io/"}
)

// recorder follows every kind a move takes, in both clusters, while a run
// lasts: the last state each object of the fleet had in the source (what
// the copy should be), and the first state its copy had in the target (what
// the mover created).
type recorder struct {
	keep func(namespace, name string) bool

	mu    sync.Mutex
	last  map[snapshot.Key]*unstructured.Unstructured
	first map[snapshot.Key]*unstructured.Unstructured
	// latest is the latest state of each copy in the target, to tell a
	// write that changed only its managed fields; restores are those
	// writes, with when they were seen.
	latest   map[snapshot.Key]*unstructured.Unstructured
	restores map[snapshot.Key][]managedFieldsWrite
	watches  []watch.Interface
	wg       sync.WaitGroup
}

// startRecorder opens one watch per kind in each cluster. A watch opened
// without a resourceVersion first lists what exists, as ADDED events.
func startRecorder(ctx context.Context, source, target *rest.Config, kinds []schema.GroupVersionKind, keep func(namespace, name string) bool) (*recorder, error) {
	r := newRecorder(keep)
	for _, side := range []struct {
		cfg    *rest.Config
		record func(watch.Event)
	}{{source, r.recordSource}, {target, r.recordTarget}} {
		c, err := client.NewWithWatch(side.cfg, client.Options{})
		if err != nil {
			r.stop()
			return nil, err
		}
		for _, gvk := range kinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			w, err := c.Watch(ctx, list)
			if err != nil {
				r.stop()
				return nil, fmt.Errorf("watching %s: %w", gvk.Kind, err)
			}
			r.watches = append(r.watches, w)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				for ev := range w.ResultChan() {
					side.record(ev)
				}
			}()
		}
	}
	return r, nil
}

func (r *recorder) object(ev watch.Event) (*unstructured.Unstructured, snapshot.Key, bool) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok || !r.keep(u.GetNamespace(), u.GetName()) {
		return nil, snapshot.Key{}, false
	}
	return u, snapshot.Normalize(u, snapshot.Options{}).Key(), true
}

// recordSource keeps the last state of each original before the mover
// began deleting it: clusterctl marks it delete-for-move with a JSON patch
// that replaces every other annotation, so what follows is the mover's
// bookkeeping, not the state the copy should have.
func (r *recorder) recordSource(ev watch.Event) {
	if u, key, ok := r.object(ev); ok && !beingDeletedForMove(u) {
		r.mu.Lock()
		r.last[key] = u
		r.mu.Unlock()
	}
}

func newRecorder(keep func(namespace, name string) bool) *recorder {
	return &recorder{keep: keep, last: map[snapshot.Key]*unstructured.Unstructured{},
		first: map[snapshot.Key]*unstructured.Unstructured{}, latest: map[snapshot.Key]*unstructured.Unstructured{},
		restores: map[snapshot.Key][]managedFieldsWrite{}}
}

// managedFieldsWrite is a write to a copy that changed nothing but its
// managed fields.
type managedFieldsWrite struct {
	seen   time.Time
	fields []metav1.ManagedFieldsEntry
}

// recordTarget keeps the state each copy was created with, and the writes
// that later changed only its managed fields: both movers restore the
// source's managed fields that way, in a write of their own right after
// the create (the API server keeps the managed fields a request sets only
// when it changes nothing else, so they cannot come with the create).
// differences takes those seen before the mover was done as the mover's.
func (r *recorder) recordTarget(ev watch.Event) {
	if ev.Type != watch.Added && ev.Type != watch.Modified {
		return
	}
	u, key, ok := r.object(ev)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.latest[key]
	r.latest[key] = u
	_, seen := r.first[key]
	switch {
	case !seen && ev.Type == watch.Added:
		r.first[key] = u
	case seen && prev != nil && onlyManagedFieldsChanged(prev, u):
		r.restores[key] = append(r.restores[key], managedFieldsWrite{seen: time.Now(), fields: u.GetManagedFields()})
	}
}

// onlyManagedFieldsChanged reports whether b follows a by a write that
// changed nothing but the managed fields.
func onlyManagedFieldsChanged(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		u = u.DeepCopy()
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
		return u.Object
	}
	return !reflect.DeepEqual(a.GetManagedFields(), b.GetManagedFields()) && reflect.DeepEqual(strip(a), strip(b))
}

// stop closes the watches and waits until their events are recorded.
func (r *recorder) stop() {
	for _, w := range r.watches {
		w.Stop()
	}
	r.wg.Wait()
}

// copyDiff is one object whose copy differs from its original's last state.
type copyDiff struct {
	Key  snapshot.Key
	Diff string
}

// differences compares each copy the mover created in the target, with
// the managed fields of the last write before done that changed only
// them (done is when the mover had copied everything, before the target's
// controllers take over: a controller that later re-applies an owner
// reference changes only managed fields too), with the last state of its
// original in the source, leaving out what a mover must write (comparable
// returns what is compared). Objects the source held but the target never
// got are reported as missing.
func (r *recorder) differences(done time.Time) []copyDiff {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []copyDiff
	for key, original := range r.last {
		if original.GetNamespace() == "" {
			continue // Global objects are copied only when missing.
		}
		cp, ok := r.first[key]
		if !ok {
			out = append(out, copyDiff{Key: key, Diff: "never created in the target"})
			continue
		}
		for _, w := range r.restores[key] {
			if w.seen.Before(done) {
				cp = cp.DeepCopy()
				cp.SetManagedFields(w.fields)
			}
		}
		if d := cmp.Diff(comparable(original), comparable(cp)); d != "" {
			out = append(out, copyDiff{Key: key, Diff: d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// comparable is what a copy must keep of its original: everything but the
// status (the target's controllers compute it), the finalizers (a mover
// drops them to delete the original), and what a mover writes to pause and
// mark the objects it moves.
func comparable(u *unstructured.Unstructured) snapshot.Object {
	u = u.DeepCopy()
	if u.GetKind() == "Cluster" && strings.HasPrefix(u.GetAPIVersion(), "cluster.x-k8s.io/") {
		unstructured.RemoveNestedField(u.Object, "spec", "paused")
	}
	o := snapshot.Normalize(u, snapshot.Options{IgnoreLabels: moverLabels, IgnoreAnnotations: moverAnnotations})
	o.Finalizers = nil
	return o
}

func beingDeletedForMove(u *unstructured.Unstructured) bool {
	_, marked := u.GetAnnotations()[clusterctlv1.DeleteForMoveAnnotation]
	return marked || u.GetDeletionTimestamp() != nil
}
