package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/move-operator/move-operator/test/capiprovider"
)

// Options describe the fleet. The zero value is one classic cluster with two
// workers in namespace "fleet".
type Options struct {
	// Clusters is the number of workload clusters, N. Default 1.
	Clusters int
	// Workers is the number of worker Machines of each cluster's
	// MachineDeployment. Default 2; 0 is allowed.
	Workers *int
	// ControlPlaneReplicas is the number of control-plane Machines per cluster,
	// 1 or 3 (KubeadmControlPlane refuses even numbers). Default 1.
	ControlPlaneReplicas int
	// MachinePoolReplicas is the number of instances of each cluster's
	// MachinePool. Default 1.
	MachinePoolReplicas int
	// Namespaces receive the clusters round-robin; missing ones are created.
	// Default ["fleet"].
	Namespaces []string
	// ClassNamespace holds the ClusterClass used across namespaces. Default
	// "<Namespaces[0]>-classes".
	ClassNamespace string
	// Name prefixes cluster names (<Name>-<i>) and names the shared identity.
	// Default "workload".
	Name string
	// KubernetesVersion of the workload clusters. Default v1.34.2.
	KubernetesVersion string
	// Concurrency bounds the clusters created at once. Default 4.
	Concurrency int
	// Live, if set, makes the fleet for a management cluster whose
	// controllers run (testenv.Options.Controllers): see Live.
	Live *Live
	// Hosts gives each worker Machine of the MachineDeployments a
	// BareMetalHost consumed by its LoopMachine (package hostprovider;
	// the cluster needs testenv.Options.Hosts). The hosts are created
	// without status: with live controllers, the source's host controller
	// provisions them, once each.
	Hosts bool
}

// Shape is how a workload cluster is defined.
type Shape string

// Shapes of workload clusters.
const (
	// Classic clusters reference their infrastructure and control plane directly.
	Classic Shape = "Classic"
	// ClusterClass clusters use a ClusterClass in their own namespace.
	ClusterClass Shape = "ClusterClass"
	// CrossNamespaceClusterClass clusters use a ClusterClass in another namespace.
	CrossNamespaceClusterClass Shape = "CrossNamespaceClusterClass"
)

// Fleet describes what Create made.
type Fleet struct {
	// Clusters are the workload clusters, in creation order.
	Clusters []WorkloadCluster
	// Namespaces holds the fleet's namespaces, ClassNamespace included.
	Namespaces []string
	// Identities names the cluster-scoped LoopClusterIdentity: one for a
	// fleet Create made, one per fleet for fleets joined by Join.
	Identities []string
	// ClusterClasses are the ClusterClasses created.
	ClusterClasses []client.ObjectKey
	// Objects counts the objects created, by kind.
	Objects map[string]int
	// Duration is how long Create took.
	Duration time.Duration
}

// WorkloadCluster is one workload cluster of the fleet.
type WorkloadCluster struct {
	Namespace string
	Name      string
	Shape     Shape
	// ClassRef names the ClusterClass of a ClusterClass-based cluster.
	ClassRef *client.ObjectKey
	// Machines are the names of all its Machines (control plane and workers).
	Machines []string
	// Hosts are the names of its BareMetalHosts (Options.Hosts), one per
	// worker Machine.
	Hosts []string
}

// Join is the fleets as one (created apart, in the same management
// cluster): their clusters, namespaces, identities, ClusterClasses and
// object counts together. A pivot's fleet is so made: the self-hosted
// cluster's, whose workload cluster is the target management cluster, and
// the others'.
func Join(fleets ...*Fleet) *Fleet {
	out := &Fleet{Objects: map[string]int{}}
	for _, f := range fleets {
		out.Clusters = append(out.Clusters, f.Clusters...)
		out.Namespaces = append(out.Namespaces, f.Namespaces...)
		out.Identities = append(out.Identities, f.Identities...)
		out.ClusterClasses = append(out.ClusterClasses, f.ClusterClasses...)
		for kind, n := range f.Objects {
			out.Objects[kind] += n
		}
		out.Duration += f.Duration
	}
	return out
}

// Total is the number of objects created.
func (f *Fleet) Total() int {
	n := 0
	for _, c := range f.Objects {
		n += c
	}
	return n
}

func (o *Options) defaults() error {
	if o.Clusters <= 0 {
		o.Clusters = 1
	}
	if o.Workers == nil {
		two := 2
		o.Workers = &two
	}
	if *o.Workers < 0 {
		return fmt.Errorf("fleet workers %d must not be negative", *o.Workers)
	}
	if o.ControlPlaneReplicas == 0 {
		o.ControlPlaneReplicas = 1
	}
	if o.ControlPlaneReplicas%2 == 0 || o.ControlPlaneReplicas < 0 {
		return fmt.Errorf("fleet control plane replicas %d must be odd", o.ControlPlaneReplicas)
	}
	if o.MachinePoolReplicas <= 0 {
		o.MachinePoolReplicas = 1
	}
	if len(o.Namespaces) == 0 {
		o.Namespaces = []string{"fleet"}
	}
	if o.ClassNamespace == "" {
		o.ClassNamespace = o.Namespaces[0] + "-classes"
	}
	if o.Name == "" {
		o.Name = "workload"
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = "v1.34.2"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	return nil
}

// Create creates the fleet through c, which must use a scheme with the
// Cluster API types (capiprovider.NewScheme). Namespaces that do not exist
// are created. Objects that already exist make Create fail: a fleet is
// created once.
func Create(ctx context.Context, c client.Client, opts Options) (*Fleet, error) {
	began := time.Now()
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	w := &writer{c: c, counts: map[string]int{}}
	f := &Fleet{Namespaces: append(append([]string{}, opts.Namespaces...), opts.ClassNamespace)}
	for _, ns := range f.Namespaces {
		if err := ensureNamespace(ctx, c, ns); err != nil {
			return nil, err
		}
	}

	identity, err := createIdentity(ctx, w, opts)
	if err != nil {
		return nil, err
	}
	f.Identities = []string{identity}

	shapes := make([]Shape, opts.Clusters)
	for i := range shapes {
		shapes[i] = []Shape{Classic, ClusterClass, CrossNamespaceClusterClass}[i%3]
	}
	// ClusterClasses first: the Cluster webhook validates a topology against
	// its (reconciled) ClusterClass.
	classes, err := createClusterClasses(ctx, w, opts, shapes, f)
	if err != nil {
		return nil, err
	}
	crs, err := createClusterResourceSets(ctx, w, opts)
	if err != nil {
		return nil, err
	}
	if err := createClusters(ctx, w, opts, f, shapes, classes, crs); err != nil {
		return nil, err
	}
	f.Objects = w.snapshotCounts()
	f.Duration = time.Since(began)
	return f, nil
}

// createClusterClasses creates a ClusterClass in each namespace whose
// clusters of the given shapes use one, records them in f, and returns
// them by namespace.
func createClusterClasses(ctx context.Context, w *writer, opts Options, shapes []Shape, f *Fleet) (map[string]*classRefs, error) {
	classes := map[string]*classRefs{}
	needClass := map[string]bool{}
	for i, shape := range shapes {
		switch shape {
		case ClusterClass:
			needClass[opts.Namespaces[i%len(opts.Namespaces)]] = true
		case CrossNamespaceClusterClass:
			needClass[opts.ClassNamespace] = true
		}
	}
	for _, ns := range sortedKeys(needClass) {
		cc, err := createClusterClass(ctx, w, ns, opts.Live)
		if err != nil {
			return nil, err
		}
		classes[ns] = cc
		f.ClusterClasses = append(f.ClusterClasses, client.ObjectKey{Namespace: ns, Name: cc.name})
	}
	return classes, nil
}

// createClusterResourceSets creates a ClusterResourceSet in each of the
// fleet's namespaces, and returns them by namespace.
func createClusterResourceSets(ctx context.Context, w *writer, opts Options) (map[string]*crsInfo, error) {
	crs := map[string]*crsInfo{}
	for _, ns := range opts.Namespaces {
		info, err := createClusterResourceSet(ctx, w, ns)
		if err != nil {
			return nil, err
		}
		crs[ns] = info
	}
	return crs, nil
}

// createClusters creates the fleet's workload clusters, opts.Concurrency at
// a time, and records them in f.
func createClusters(ctx context.Context, w *writer, opts Options, f *Fleet, shapes []Shape, classes map[string]*classRefs, crs map[string]*crsInfo) error {
	identity := f.Identities[0]
	f.Clusters = make([]WorkloadCluster, opts.Clusters)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for i := range opts.Clusters {
		ns := opts.Namespaces[i%len(opts.Namespaces)]
		wc := WorkloadCluster{Namespace: ns, Name: fmt.Sprintf("%s-%d", opts.Name, i), Shape: shapes[i]}
		var class *classRefs
		switch wc.Shape {
		case ClusterClass:
			class = classes[ns]
		case CrossNamespaceClusterClass:
			class = classes[opts.ClassNamespace]
		}
		if class != nil {
			wc.ClassRef = &client.ObjectKey{Namespace: class.namespace, Name: class.name}
		}
		g.Go(func() error {
			b := &clusterBuilder{w: w, opts: opts, wc: wc, index: i, class: class, identity: identity, crs: crs[ns]}
			if err := b.build(gctx); err != nil {
				return fmt.Errorf("creating workload cluster %s/%s: %w", wc.Namespace, wc.Name, err)
			}
			f.Clusters[i] = b.wc
			return nil
		})
	}
	return g.Wait()
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// writer creates objects and sets their status, counting what it made.
type writer struct {
	c client.Client

	mu     sync.Mutex
	counts map[string]int
}

// create creates obj (through the webhooks) and then, if status is not nil,
// lets status fill the status and writes it through the status subresource,
// as the owning controller would after its first reconcile.
func (w *writer) create(ctx context.Context, obj client.Object, status func()) error {
	gvk, err := apiutil.GVKForObject(obj, w.c.Scheme())
	if err != nil {
		return err
	}
	if err := w.createOnce(ctx, obj); err != nil {
		return fmt.Errorf("creating %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	w.count(gvk)
	if status == nil {
		return nil
	}
	status()
	return w.setStatus(ctx, obj)
}

// createOnce creates obj, retrying what a loaded API server or webhook
// fails for a moment. A create retried after an answer was lost may find
// the object made by the attempt before: obj is then read back, so that its
// UID is the one the fleet's owner references name.
func (w *writer) createOnce(ctx context.Context, obj client.Object) error {
	retried := false
	return RetryTransient(ctx, func() error {
		err := w.c.Create(ctx, obj)
		if retried && apierrors.IsAlreadyExists(err) {
			return w.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		retried = true
		return err
	})
}

// fixtureAttempts bounds the attempts of one write of the fixture.
const fixtureAttempts = 6

// RetryTransient calls fn until it succeeds, fails for good, or has failed
// fixtureAttempts times for a reason that passes: a large fleet is created
// on a loaded machine, where an API server or a Cluster API webhook (which
// reads the ClusterClass a Cluster names) now and then times out. Creating
// the whole fleet again for one such answer costs minutes at N=1,000.
// Package devfleet retries its creates so too.
func RetryTransient(ctx context.Context, fn func() error) error {
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == fixtureAttempts || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// transient says whether err is an answer that retrying may change: the API
// server's own timeouts and overload, and a webhook that could not answer in
// time ("Please retry", or the deadline of its call).
func transient(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "Please retry") || strings.Contains(msg, "context deadline exceeded") ||
		strings.Contains(msg, "failed calling webhook")
}

func (w *writer) count(gvk schema.GroupVersionKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[gvk.Kind]++
}

func (w *writer) snapshotCounts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

// ownerRef references owner the way Cluster API controllers do: controller
// references block the owner's deletion, plain ones do not.
func (w *writer) ownerRef(owner client.Object, controller bool) metav1.OwnerReference {
	gvk, err := apiutil.GVKForObject(owner, w.c.Scheme())
	if err != nil {
		panic(fmt.Sprintf("owner %T is not in the client's scheme: %v", owner, err))
	}
	ref := metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID()}
	if controller {
		t := true
		ref.Controller, ref.BlockOwnerDeletion = &t, &t
	}
	return ref
}

// suffix returns the five characters Cluster API appends to generated names,
// derived from key so the same options always give the same names.
func suffix(key string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	v := h.Sum64()
	out := make([]byte, 5)
	for i := range out {
		out[i] = alphabet[v%uint64(len(alphabet))]
		v /= uint64(len(alphabet))
	}
	return string(out)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// loopGV is the API version of the loop infrastructure provider's kinds.
var loopGV = capiprovider.LoopGroupVersion

// setStatus writes obj's status through the status subresource, as a
// merge patch of the whole status: live controllers may be writing the
// same object (their Paused condition), which an update would conflict with.
func (w *writer) setStatus(ctx context.Context, obj client.Object) error {
	gvk, _ := apiutil.GVKForObject(obj, w.c.Scheme())
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("reading the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	body, err := json.Marshal(map[string]any{"status": fields["status"]})
	if err != nil {
		return err
	}
	if err := RetryTransient(ctx, func() error { return w.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)) }); err != nil {
		return fmt.Errorf("writing the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
