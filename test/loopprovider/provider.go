package loopprovider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/test/cloud"
)

// GroupVersion is the API group and version of the loop provider's kinds.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

// Kinds of the loop infrastructure provider.
const (
	ClusterKind         = "LoopCluster"
	ClusterTemplateKind = "LoopClusterTemplate"
	MachineKind         = "LoopMachine"
	MachineTemplateKind = "LoopMachineTemplate"
	MachinePoolKind     = "LoopMachinePool"
	ClusterIdentityKind = "LoopClusterIdentity"
)

// ProviderIDPrefix starts every providerID of a loop machine.
const ProviderIDPrefix = "loop:///"

// Finalizers of the loop kinds.
const (
	ClusterFinalizer     = "loopcluster.infrastructure.cluster.x-k8s.io"
	MachineFinalizer     = "loopmachine.infrastructure.cluster.x-k8s.io"
	MachinePoolFinalizer = "loopmachinepool.infrastructure.cluster.x-k8s.io"
)

// Options configure the controllers.
type Options struct {
	// Cloud is where the VMs live. Required.
	Cloud *cloud.Cloud
	// ManagementCluster names the cluster the controllers run for, in the
	// cloud's event log.
	ManagementCluster string
	// Switches are read on every reconcile; nil means all off.
	Switches *Switches
	// Activity, if set, counts the reconciles.
	Activity *Activity
	// Contract is the Cluster API contract to follow, the one of the
	// Cluster API the provider runs beside. Default ContractV1Beta2.
	Contract Contract
}

// Switches change the provider's behaviour while it runs. The zero value is
// a well-behaved provider.
type Switches struct {
	ignorePause       atomic.Bool
	deleteIgnoresMove atomic.Bool
}

// SetIgnorePause makes the provider act on paused objects (true), as some
// real providers do, or respect pause (false, the default).
func (s *Switches) SetIgnorePause(on bool) { s.ignorePause.Store(on) }

// IgnorePause reports the switch.
func (s *Switches) IgnorePause() bool { return s != nil && s.ignorePause.Load() }

// SetDeleteIgnoresMove makes the provider's delete path run for paused
// objects and take a move's deletion (clusterctl.cluster.x-k8s.io/delete-for-move)
// for a real one (true): a deleted LoopMachine or LoopMachinePool has its VMs
// powered off and deleted whatever the pause and the mark say, while the
// normal path still respects pause. That is a provider that guards only its
// normal path with pause and never heard of delete-for-move, as the
// Tinkerbell provider was before tinkerbell/cluster-api-provider-tinkerbell#460
// (its power-off jobs ran when a move deleted the source's
// TinkerbellMachines) and as kubernetes-sigs/cluster-api-provider-vsphere#2510
// noted of VSphereMachine. Off (the default) is a well-behaved provider.
func (s *Switches) SetDeleteIgnoresMove(on bool) { s.deleteIgnoresMove.Store(on) }

// DeleteIgnoresMove reports the switch.
func (s *Switches) DeleteIgnoresMove() bool { return s != nil && s.deleteIgnoresMove.Load() }

// Activity counts the provider's reconciles, for tests that must know none
// is in flight.
type Activity struct {
	inFlight atomic.Int64
	started  atomic.Int64

	mu   sync.Mutex
	last map[string]int64
}

// InFlight is the number of reconciles running now.
func (a *Activity) InFlight() int64 { return a.inFlight.Load() }

// Started is the number of reconciles started so far.
func (a *Activity) Started() int64 { return a.started.Load() }

// ReconcilesOf is the number of reconciles of one object so far.
func (a *Activity) ReconcilesOf(kind, namespace, name string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[kind+"/"+namespace+"/"+name]
}

func (a *Activity) begin(kind string, req reconcile.Request) func() {
	if a == nil {
		return func() {}
	}
	a.inFlight.Add(1)
	a.started.Add(1)
	a.mu.Lock()
	if a.last == nil {
		a.last = map[string]int64{}
	}
	a.last[kind+"/"+req.Namespace+"/"+req.Name]++
	a.mu.Unlock()
	return func() { a.inFlight.Add(-1) }
}

// NewScheme returns the scheme the provider's manager needs: the built-in
// kinds and Cluster API's core kinds (the loop kinds are read unstructured).
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// SetupWithManager registers the LoopCluster, LoopMachine and
// LoopMachinePool controllers with mgr, whose client must read unstructured
// objects from its cache (client.CacheOptions.Unstructured) and whose scheme
// holds NewScheme's kinds.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options, co controller.Options) error {
	if opts.Cloud == nil {
		return errors.New("setting up the loop provider: no cloud")
	}
	if opts.Switches == nil {
		opts.Switches = &Switches{}
	}
	switch opts.Contract {
	case "":
		opts.Contract = ContractV1Beta2
	case ContractV1Beta1, ContractV1Beta2:
	default:
		return fmt.Errorf("setting up the loop provider: contract %q is neither %s nor %s", opts.Contract, ContractV1Beta1, ContractV1Beta2)
	}
	b := base{client: mgr.GetClient(), opts: opts}
	controllers := []struct {
		kind string
		r    reconcile.Reconciler
		// owner is the Cluster API kind that owns the loop kind;
		// ownerToLoop maps one of its objects to its loop object.
		owner       client.Object
		ownerToLoop handler.MapFunc
	}{
		{ClusterKind, &clusterReconciler{base: b}, &clusterv1.Cluster{},
			util.ClusterToInfrastructureMapFunc(ctx, GroupVersion.WithKind(ClusterKind), mgr.GetClient(), newObject(ClusterKind))},
		{MachineKind, &machineReconciler{base: b}, &clusterv1.Machine{},
			util.MachineToInfrastructureMapFunc(GroupVersion.WithKind(MachineKind))},
		{MachinePoolKind, &machinePoolReconciler{base: b}, &clusterv1.MachinePool{},
			util.MachinePoolToInfrastructureMapFunc(ctx, GroupVersion.WithKind(MachinePoolKind))},
	}
	for _, c := range controllers {
		if err := b.watch(ctx, mgr, co, c.kind, c.r, c.owner, c.ownerToLoop); err != nil {
			return err
		}
	}
	return nil
}

// base is what every loop reconciler shares.
type base struct {
	client client.Client
	opts   Options
}

func (b base) caller(kind string, obj client.Object) cloud.Caller {
	return cloud.Caller{ManagementCluster: b.opts.ManagementCluster, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// paused reports whether the provider must leave obj alone.
func (b base) paused(cluster *clusterv1.Cluster, obj client.Object) bool {
	if b.deletesRegardless(obj) {
		return false
	}
	return !b.opts.Switches.IgnorePause() && annotations.IsPaused(cluster, obj)
}

// deletesRegardless reports whether obj is being deleted and the provider's
// delete path runs whatever the pause says (Switches.DeleteIgnoresMove).
func (b base) deletesRegardless(obj client.Object) bool {
	return b.opts.Switches.DeleteIgnoresMove() && !obj.GetDeletionTimestamp().IsZero()
}

// deletedForMove reports whether a deleted obj is only leaving for another
// management cluster, so its VMs must stay: it carries clusterctl's
// delete-for-move mark, and the provider reads it.
func (b base) deletedForMove(obj client.Object) bool {
	_, marked := obj.GetAnnotations()[clusterctlv1.DeleteForMoveAnnotation]
	return marked && !b.opts.Switches.DeleteIgnoresMove()
}

// notPaused filters events of paused objects, as predicates.ResourceNotPaused
// does, unless the provider ignores pause.
func (b base) notPaused() predicate.Funcs {
	keep := func(o client.Object) bool {
		return b.opts.Switches.IgnorePause() || b.deletesRegardless(o) || !annotations.HasPaused(o)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return keep(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return keep(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return keep(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return keep(e.Object) },
	}
}

func newObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersion.WithKind(kind))
	return u
}

func newList(kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(GroupVersion.WithKind(kind + "List"))
	return l
}

// ensureFinalizer adds finalizer to obj if missing.
func (b base) ensureFinalizer(ctx context.Context, obj *unstructured.Unstructured, finalizer string) error {
	for _, f := range obj.GetFinalizers() {
		if f == finalizer {
			return nil
		}
	}
	patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj.SetFinalizers(append(obj.GetFinalizers(), finalizer))
	if err := b.client.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("adding finalizer to %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// removeFinalizer removes finalizer from obj if present.
func (b base) removeFinalizer(ctx context.Context, obj *unstructured.Unstructured, finalizer string) error {
	var kept []string
	for _, f := range obj.GetFinalizers() {
		if f != finalizer {
			kept = append(kept, f)
		}
	}
	if len(kept) == len(obj.GetFinalizers()) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj.SetFinalizers(kept)
	if err := b.client.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer from %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, cloud.ErrNotFound) }
