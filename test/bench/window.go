package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/testenv"
)

// windowGrace is how long after a move the bench waits for the watches to
// show every stopped controller running again: the operator is Done only
// once its providers are Available, and clusterctl returns once it has
// unpaused the target's Clusters, so the watches' events are at most
// moments behind.
const windowGrace = 30 * time.Second

// downWindow is how long a mover kept one cluster's controllers from
// running: for the operator, from the first provider Deployment it scaled
// to zero to the last one Available again; for clusterctl, from the first
// of the fleet's Clusters paused to the last one unpaused (in the target)
// or gone (in the source, where the paused Clusters are deleted).
type downWindow struct {
	from, to time.Time
}

// stopped says whether the mover stopped anything there.
func (w downWindow) stopped() bool { return !w.from.IsZero() }

// open says that the controllers were not seen running again by the end
// of the watch.
func (w downWindow) open() bool { return w.stopped() && w.to.IsZero() }

func (w downWindow) duration() time.Duration {
	if !w.stopped() || w.open() {
		return 0
	}
	return w.to.Sub(w.from)
}

// eitherCluster is the window over both clusters: from the first stop in
// either to the last restart in either; for clusterctl, from the first
// Cluster paused in the source to the last one unpaused in the target.
func eitherCluster(windows map[string]downWindow) downWindow {
	var out downWindow
	open := false
	for _, w := range windows {
		if !w.stopped() {
			continue
		}
		if out.from.IsZero() || w.from.Before(out.from) {
			out.from = w.from
		}
		open = open || w.open()
		if w.to.After(out.to) {
			out.to = w.to
		}
	}
	if open {
		// One cluster not back leaves the whole window open.
		out.to = time.Time{}
	}
	return out
}

// downClock turns what a watch shows of one cluster into its downWindow.
// Each observation says whether any watched controller is stopped and
// whether every one runs; the window opens at the first stop and closes at
// the first moment after the last stop when none is stopped and every one
// runs.
type downClock struct {
	window downWindow
	down   bool
}

func (c *downClock) observe(at time.Time, anyStopped, allRunning bool) {
	if anyStopped {
		if !c.window.stopped() {
			c.window.from = at
		}
		c.window.to, c.down = time.Time{}, true
		return
	}
	if c.down && allRunning {
		c.window.to, c.down = at, false
	}
}

// deploymentsState says whether any of the providers' Deployments is
// scaled to zero and whether every one runs: scaled up and Available as
// kstatus computes it (Current), as the operator waits for them.
func deploymentsState(ds []*appsv1.Deployment) (anyStopped, allRunning bool) {
	allRunning = true
	for _, d := range ds {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			anyStopped, allRunning = true, false
			continue
		}
		if allRunning && !deploymentCurrent(d) {
			allRunning = false
		}
	}
	return anyStopped, allRunning
}

func deploymentCurrent(d *appsv1.Deployment) bool {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return false
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	res, err := status.Compute(u)
	return err == nil && res.Status == status.CurrentStatus
}

// clustersState says whether any of the Clusters is paused
// (spec.paused), and whether none is.
func clustersState(cs []*unstructured.Unstructured) (anyStopped, allRunning bool) {
	for _, c := range cs {
		if paused, _, _ := unstructured.NestedBool(c.Object, "spec", "paused"); paused {
			return true, false
		}
	}
	return false, true
}

// controllersWatch follows, in both clusters, what says whether a mover's
// controllers run, and keeps each cluster's downWindow.
type controllersWatch struct {
	mu     sync.Mutex
	clocks map[string]*downClock
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// watchControllers starts following what the mover of f stops: the
// provider Deployments of both clusters for the operator, the fleet's
// Clusters in both for clusterctl; nil for the floors, which stop nothing.
// It returns once the watches have listed what there is.
func (b *bench) watchControllers(ctx context.Context, f benchFleet) (*controllersWatch, error) {
	env := b.clusters.env
	w := &controllersWatch{clocks: map[string]*downClock{}}
	var state func(*testenv.Management) (cache.SharedIndexInformer, func() (bool, bool), error)
	switch {
	case isOperator(f.tool):
		state = providerDeployments
	case f.tool == toolClusterctl:
		gvr, err := b.clusters.clusterResource()
		if err != nil {
			return nil, err
		}
		state = func(m *testenv.Management) (cache.SharedIndexInformer, func() (bool, bool), error) {
			return fleetClusters(m, gvr, f.namespace)
		}
	default:
		return nil, nil
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	var synced []cache.InformerSynced
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		informer, read, err := state(m)
		if err != nil {
			w.stop()
			return nil, err
		}
		clock := &downClock{}
		w.clocks[m.Name] = clock
		observe := func() {
			anyStopped, allRunning := read()
			w.mu.Lock()
			clock.observe(time.Now(), anyStopped, allRunning)
			w.mu.Unlock()
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { observe() },
			UpdateFunc: func(any, any) { observe() },
			DeleteFunc: func(any) { observe() },
		}); err != nil {
			w.stop()
			return nil, fmt.Errorf("watching the controllers of %s: %w", m.Name, err)
		}
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			informer.Run(watchCtx.Done())
		}()
		synced = append(synced, informer.HasSynced)
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		w.stop()
		return nil, fmt.Errorf("the watches of the %s's controllers did not list within a minute", f.tool)
	}
	return w, nil
}

// providerDeployments watches the Deployments labelled
// cluster.x-k8s.io/provider in m, those the operator scales.
func providerDeployments(m *testenv.Management) (cache.SharedIndexInformer, func() (bool, bool), error) {
	cs, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a client for the Deployments of %s: %w", m.Name, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = capiprovider.ProviderLabel }))
	informer := factory.Apps().V1().Deployments().Informer()
	return informer, func() (bool, bool) {
		var ds []*appsv1.Deployment
		for _, o := range informer.GetStore().List() {
			if d, ok := o.(*appsv1.Deployment); ok {
				ds = append(ds, d)
			}
		}
		return deploymentsState(ds)
	}, nil
}

// fleetClusters watches the Clusters of a fleet's namespace in m, at
// their storage version, so that no conversion webhook is needed.
func fleetClusters(m *testenv.Management, gvr schema.GroupVersionResource, namespace string) (cache.SharedIndexInformer, func() (bool, bool), error) {
	dyn, err := dynamic.NewForConfig(m.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a client for the Clusters of %s: %w", m.Name, err)
	}
	informer := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil).ForResource(gvr).Informer()
	return informer, func() (bool, bool) {
		var cs []*unstructured.Unstructured
		for _, o := range informer.GetStore().List() {
			if c, ok := o.(*unstructured.Unstructured); ok {
				cs = append(cs, c)
			}
		}
		return clustersState(cs)
	}, nil
}

// finish waits, at most grace, for every cluster whose controllers were
// stopped to show them running again, stops the watches and returns each
// cluster's window.
func (w *controllersWatch) finish(ctx context.Context, grace time.Duration) map[string]downWindow {
	if w == nil {
		return nil
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
wait:
	for !w.allBack() {
		select {
		case <-ctx.Done():
			break wait
		case <-deadline.C:
			break wait
		case <-ticker.C:
		}
	}
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]downWindow{}
	for name, c := range w.clocks {
		out[name] = c.window
	}
	return out
}

func (w *controllersWatch) allBack() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.clocks {
		if c.down {
			return false
		}
	}
	return true
}

// clusterResource is the Cluster resource at the storage version the
// bench found its CRD with.
func (c *clusters) clusterResource() (schema.GroupVersionResource, error) {
	for _, gvk := range c.types {
		if gvk.Group == "cluster.x-k8s.io" && gvk.Kind == "Cluster" {
			return gvk.GroupVersion().WithResource("clusters"), nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("no Cluster kind among the moved kinds %v", c.types)
}

// stop ends the watches; safe to call more than once, and on nil.
func (w *controllersWatch) stop() {
	if w == nil || w.cancel == nil {
		return
	}
	w.cancel()
	w.done.Wait()
}

// describeDown states a move's windows in a line: "source 41.2s, target
// 38.0s, either cluster 44.9s".
func describeDown(windows map[string]downWindow) string {
	var parts []string
	for _, name := range []string{"source", "target"} {
		if w, ok := windows[name]; ok {
			parts = append(parts, name+" "+windowSeconds(w))
		}
	}
	return strings.Join(append(parts, "either cluster "+windowSeconds(eitherCluster(windows))), ", ")
}

// windowSeconds is a window's length as the report gives it: "-" when
// nothing was stopped, "open" when it was not seen to end.
func windowSeconds(w downWindow) string {
	switch {
	case !w.stopped():
		return "-"
	case w.open():
		return "open"
	}
	return seconds(w.duration())
}
