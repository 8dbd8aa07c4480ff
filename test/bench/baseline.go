package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/testenv"
)

// baselineMover is the floor: the fleet's objects created in the target and
// deleted from the source by plain code, with nothing a real mover needs
// beyond that (no discovery of ownership rules, no pausing, no status, no
// progress records, no webhooks). It uses what the operator uses: one
// controller-runtime client per cluster with the operator's QPS and burst
// (controller-runtime gives every kind its own token bucket, as for the
// operator), at most the operator's concurrency of requests in flight,
// creation in ownership order with ownerReferences rewritten to the new
// UIDs, and deletion in reverse order, each object by one patch (the
// delete-for-move annotation and no finalizers) and a DELETE.
//
// The operator moves with the providers' admission webhooks bypassed for
// the objects in flight; the baseline removes the webhook configurations
// of both clusters for its move (outside its timing) to the same effect.
//
// With parity set it is the parity floor (toolParity): the same requests,
// in the same order and with the same concurrency, and after each create
// the writes a faithful move makes to the copy (parityWrites), in the same
// goroutine, so that they count in the copy as the operator's do.
type baselineMover struct {
	b        *bench
	f        benchFleet
	parity   *parityWrites
	src, tgt client.Client
	webhooks []*savedWebhooks
}

func (m *baselineMover) prepare(ctx context.Context) ([]component, error) {
	var err error
	env := m.b.clusters.env
	if m.src, err = m.client(env.Source); err != nil {
		return nil, err
	}
	if m.tgt, err = m.client(env.Target); err != nil {
		return nil, err
	}
	for _, mgmt := range []*testenv.Management{env.Source, env.Target} {
		saved, err := removeWebhooks(ctx, mgmt)
		if saved != nil {
			m.webhooks = append(m.webhooks, saved)
		}
		if err != nil {
			return nil, err
		}
	}
	// The API server applies webhook configuration changes from an
	// informer, a moment after the DELETE returns.
	time.Sleep(2 * time.Second)
	return nil, nil
}

// client builds the one client the baseline uses for a cluster, with the
// operator's rate limits.
func (m *baselineMover) client(mgmt *testenv.Management) (client.Client, error) {
	cfg := rest.CopyConfig(mgmt.Config)
	cfg.QPS, cfg.Burst = float32(m.b.opts.qps), m.b.opts.burst
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the %s's client for %s: %w", m.f.tool, mgmt.Name, err)
	}
	return c, nil
}

func (m *baselineMover) move(ctx context.Context, r *result) error {
	began := time.Now()
	objs, err := m.read(ctx)
	if err != nil {
		return err
	}
	groups, err := ownershipGroups(objs)
	if err != nil {
		return err
	}
	for _, ns := range []string{m.f.namespace, m.f.classNamespace} {
		if err := m.tgt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s in the target: %w", ns, err)
		}
	}
	newUIDs := &uidMap{m: map[types.UID]types.UID{}}
	for _, group := range groups {
		if err := m.forEach(ctx, group, func(ctx context.Context, o *unstructured.Unstructured) error {
			return m.create(ctx, o, newUIDs)
		}); err != nil {
			return err
		}
	}
	copied := time.Now()
	for i := len(groups) - 1; i >= 0; i-- {
		if err := m.forEach(ctx, groups[i], m.delete); err != nil {
			return err
		}
	}
	deleted := time.Now()
	r.copy, r.delete = copied.Sub(began), deleted.Sub(copied)
	r.copyDelete = deleted.Sub(began)
	r.whole = r.copyDelete
	return nil
}

func (m *baselineMover) finish(ctx context.Context, _ *result) error {
	var err error
	for _, saved := range m.webhooks {
		if restoreErr := saved.restore(ctx); restoreErr != nil && err == nil {
			err = restoreErr
		}
	}
	// As in prepare: let the API server see the webhooks again before the
	// next fleet is created through them.
	time.Sleep(2 * time.Second)
	return err
}

// read lists every object of the moved kinds in the fleet's two
// namespaces, page by page, as the movers do.
func (m *baselineMover) read(ctx context.Context) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, ns := range []string{m.f.namespace, m.f.classNamespace} {
		for _, gvk := range m.b.clusters.namespaced {
			token := ""
			for {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := m.src.List(ctx, list, client.InNamespace(ns), client.Limit(500), client.Continue(token)); err != nil {
					return nil, fmt.Errorf("listing %s in namespace %s of the source: %w", gvk.Kind, ns, err)
				}
				for i := range list.Items {
					o := &list.Items[i]
					o.SetGroupVersionKind(gvk)
					out = append(out, o)
				}
				if token = list.GetContinue(); token == "" {
					break
				}
			}
		}
	}
	return out, nil
}

// forEach runs f on every object of a group with at most the operator's
// concurrency in flight.
func (m *baselineMover) forEach(ctx context.Context, group []*unstructured.Unstructured, f func(context.Context, *unstructured.Unstructured) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.b.opts.concurrency)
	for _, o := range group {
		g.Go(func() error { return f(gctx, o) })
	}
	return g.Wait()
}

// create creates the target copy of o: its metadata stripped of what the
// API server assigns, its owner references pointing at the owners' copies;
// for the parity floor, then writes what a faithful move writes after.
func (m *baselineMover) create(ctx context.Context, o *unstructured.Unstructured, newUIDs *uidMap) error {
	cp := o.DeepCopy()
	for _, field := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(cp.Object, "metadata", field)
	}
	delete(cp.Object, "status")
	refs := cp.GetOwnerReferences()
	for i := range refs {
		uid, ok := newUIDs.get(refs[i].UID)
		if !ok {
			return fmt.Errorf("%s %s/%s: its owner %s %s has no copy in the target", o.GetKind(), o.GetNamespace(), o.GetName(), refs[i].Kind, refs[i].Name)
		}
		refs[i].UID = uid
	}
	cp.SetOwnerReferences(refs)
	if err := m.tgt.Create(ctx, cp); err != nil {
		return fmt.Errorf("creating %s %s/%s in the target: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	newUIDs.set(o.GetUID(), cp.GetUID())
	if m.parity != nil {
		return m.parity.finish(ctx, m.tgt, o, cp, newUIDs.get)
	}
	return nil
}

// deletePatch marks an object deleted for a move and drops its finalizers
// in one request, so the DELETE that follows removes it at once.
var deletePatch = client.RawPatch(types.MergePatchType,
	[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:""},"finalizers":null}}`, clusterctlv1.DeleteForMoveAnnotation)))

// delete removes o from the source unless it lives in the ClusterClass
// namespace, which stays (copied, not deleted, as both tools do).
func (m *baselineMover) delete(ctx context.Context, o *unstructured.Unstructured) error {
	if o.GetNamespace() != m.f.namespace {
		return nil
	}
	// An object without finalizers goes in its DELETE alone, as the
	// operator does it: there is no finalizer to drop, and nothing running
	// to read the annotation.
	if len(o.GetFinalizers()) > 0 {
		if err := m.src.Patch(ctx, o, deletePatch); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("patching %s %s/%s in the source: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if err := m.src.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s/%s from the source: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// uidMap maps source UIDs to target UIDs; the creates of a group write it
// concurrently.
type uidMap struct {
	mu sync.Mutex
	m  map[types.UID]types.UID
}

func (u *uidMap) get(k types.UID) (types.UID, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[k]
	return v, ok
}

func (u *uidMap) set(k, v types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[k] = v
}

// ownershipGroups orders objs so that every object comes in a later group
// than all its owners: group 0 holds the objects without owners among objs,
// group k those whose deepest owner is in group k-1. An owner reference to
// an object outside objs, or a cycle, is an error: the fixture has neither.
func ownershipGroups(objs []*unstructured.Unstructured) ([][]*unstructured.Unstructured, error) {
	byUID := make(map[types.UID]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		byUID[o.GetUID()] = o
	}
	depth := make(map[types.UID]int, len(objs))
	const visiting = -1
	var level func(o *unstructured.Unstructured) (int, error)
	level = func(o *unstructured.Unstructured) (int, error) {
		switch d, ok := depth[o.GetUID()]; {
		case ok && d == visiting:
			return 0, fmt.Errorf("%s %s/%s is in an ownership cycle", o.GetKind(), o.GetNamespace(), o.GetName())
		case ok:
			return d, nil
		}
		depth[o.GetUID()] = visiting
		d := 0
		for _, ref := range o.GetOwnerReferences() {
			owner, ok := byUID[ref.UID]
			if !ok {
				return 0, fmt.Errorf("%s %s/%s is owned by %s %s, which is not moved", o.GetKind(), o.GetNamespace(), o.GetName(), ref.Kind, ref.Name)
			}
			od, err := level(owner)
			if err != nil {
				return 0, err
			}
			d = max(d, od+1)
		}
		depth[o.GetUID()] = d
		return d, nil
	}
	var groups [][]*unstructured.Unstructured
	for _, o := range objs {
		d, err := level(o)
		if err != nil {
			return nil, err
		}
		for len(groups) <= d {
			groups = append(groups, nil)
		}
		groups[d] = append(groups[d], o)
	}
	return groups, nil
}
