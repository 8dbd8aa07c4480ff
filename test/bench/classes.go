package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/testenv"
)

// classReconciler plays, in the target, the one part of Cluster API's core
// controller that clusterctl's writes wait for: the ClusterClass controller
// recording that a ClusterClass is reconciled (status.observedGeneration and
// the VariablesReady condition). The Cluster admission webhooks poll for
// that for up to 2 s on every create or update of a Cluster using the
// class, and when the poll times out they warn or, when its last GET loses
// the race with the poll's own deadline (every time on these 2 busy cores),
// reject the write. clusterctl copies ClusterClasses without their status,
// so in the target every ClusterClass-based Cluster it creates, patches or
// unpauses meets that poll: here clusterctl move failed after 13 attempts
// at the first such Cluster.
//
// The real controller would not help: clusterctl pauses ClusterClasses
// before copying them, and the ClusterClass controller skips paused ones
// until clusterctl unpauses them after its last delete. This stand-in
// therefore goes further than the real controller, in clusterctl's favour:
// it marks every ClusterClass of the target reconciled as soon as it
// appears, paused or not, so the webhooks answer at once. It does so only
// while the core provider's Deployment has Ready pods, as a controller
// would. The operator does not depend on it: it copies the status of the
// ClusterClasses it moves, and bypasses the webhooks while copying.
type classReconciler struct {
	c      client.WithWatch
	core   *capiprovider.Provider
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// startClassReconciler starts the stand-in for the target m.
func startClassReconciler(ctx context.Context, m *testenv.Management) (*classReconciler, error) {
	c, err := client.NewWithWatch(m.Config, client.Options{Scheme: capiprovider.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a client for the ClusterClass stand-in in %s: %w", m.Name, err)
	}
	core := m.CAPI.Provider(capiprovider.CoreProvider)
	if core == nil {
		return nil, fmt.Errorf("no core provider installed in %s", m.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &classReconciler{c: c, core: core, cancel: cancel, done: make(chan struct{})}
	w, err := c.Watch(ctx, &clusterv1.ClusterClassList{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching the ClusterClasses of %s: %w", m.Name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.watch(ctx, w) }()
	go func() { defer wg.Done(); r.resyncOnStart(ctx) }()
	go func() { wg.Wait(); close(r.done) }()
	return r, nil
}

// watch reconciles each ClusterClass the watch shows.
func (r *classReconciler) watch(ctx context.Context, w watch.Interface) {
	defer func() { w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server ends watches now and then; open another.
				var err error
				if w, err = r.c.Watch(ctx, &clusterv1.ClusterClassList{}); err != nil {
					r.fail(fmt.Errorf("watching the ClusterClasses again: %w", err))
					return
				}
				continue
			}
			if cc, ok := ev.Object.(*clusterv1.ClusterClass); ok && ev.Type != watch.Deleted {
				r.reconcile(ctx, cc)
			}
		}
	}
}

// resyncOnStart reconciles every ClusterClass each time the core provider
// comes back (after the operator scaled it down), as a starting controller
// does with its initial list.
func (r *classReconciler) resyncOnStart(ctx context.Context) {
	for {
		if err := r.core.WaitServing(ctx, true); err != nil {
			return
		}
		list := &clusterv1.ClusterClassList{}
		if err := r.c.List(ctx, list); err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("listing the ClusterClasses: %w", err))
			}
			return
		}
		for i := range list.Items {
			r.reconcile(ctx, &list.Items[i])
		}
		if err := r.core.WaitServing(ctx, false); err != nil {
			return
		}
	}
}

func (r *classReconciler) reconcile(ctx context.Context, cc *clusterv1.ClusterClass) {
	if !r.core.Serving() || cc.DeletionTimestamp != nil || cc.Status.ObservedGeneration == cc.Generation {
		return
	}
	cc = cc.DeepCopy()
	cc.Status.ObservedGeneration = cc.Generation
	for _, c := range []metav1.Condition{
		{Type: clusterv1.ClusterClassVariablesReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ClusterClassVariablesReadyReason},
		{Type: clusterv1.ClusterClassRefVersionsUpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ClusterClassRefVersionsUpToDateReason},
	} {
		c.ObservedGeneration = cc.Generation
		meta.SetStatusCondition(&cc.Status.Conditions, c)
	}
	// A conflict or a vanished object means a newer event follows.
	if err := r.c.Status().Update(ctx, cc); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		r.fail(fmt.Errorf("writing the status of ClusterClass %s/%s: %w", cc.Namespace, cc.Name, err))
	}
}

func (r *classReconciler) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = errors.Join(r.err, err)
}

// failed returns what went wrong so far.
func (r *classReconciler) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// stop stops the stand-in and returns what went wrong while it ran.
func (r *classReconciler) stop() error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
