package loopprovider

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/test/cloud"
)

type machinePoolReconciler struct {
	base
}

func (r *machinePoolReconciler) setup(ctx context.Context, mgr ctrl.Manager, co controller.Options) error {
	gvk := GroupVersion.WithKind(MachinePoolKind)
	err := ctrl.NewControllerManagedBy(mgr).
		Named("loopmachinepool").
		For(newObject(MachinePoolKind), builder.WithPredicates(r.notPaused())).
		WithOptions(co).
		Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(util.MachinePoolToInfrastructureMapFunc(ctx, gvk))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPools),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), ctrl.LoggerFrom(ctx)))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the LoopMachinePool controller: %w", err)
	}
	return nil
}

func (r *machinePoolReconciler) clusterToPools(ctx context.Context, o client.Object) []reconcile.Request {
	list := newList(MachinePoolKind)
	if err := r.client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

func (r *machinePoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	defer r.opts.Activity.begin(MachinePoolKind, req)()
	lmp := newObject(MachinePoolKind)
	if err := r.client.Get(ctx, req.NamespacedName, lmp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	mp, err := util.GetOwnerMachinePool(ctx, r.client, metav1.ObjectMeta{Namespace: lmp.GetNamespace(), OwnerReferences: lmp.GetOwnerReferences()})
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if mp == nil {
		return ctrl.Result{}, nil // The MachinePool controller sets the owner reference first.
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.client, mp.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.paused(cluster, lmp) {
		return ctrl.Result{}, nil
	}
	if !lmp.GetDeletionTimestamp().IsZero() {
		if !r.deletedForMove(lmp) {
			if err := r.deleteVMs(ctx, MachinePoolKind, lmp, r.poolVMs(lmp, -1)); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.removeFinalizer(context.WithoutCancel(ctx), lmp, MachinePoolFinalizer)
	}
	if err := r.ensureFinalizer(ctx, lmp, MachinePoolFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) || mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, nil
	}
	replicas := int(ptr.Deref(mp.Spec.Replicas, 1))
	existing := map[int]bool{}
	for _, vm := range r.poolVMs(lmp, -1) {
		existing[poolIndex(lmp, vm.Name)] = true
	}
	flavor, _, _ := unstructured.NestedString(lmp.Object, "spec", "template", "flavor")
	ids := make([]any, 0, replicas)
	for i := range replicas {
		name := fmt.Sprintf("%s-%d", vmName(lmp.GetNamespace(), lmp.GetName()), i)
		if !existing[i] {
			if _, err := r.opts.Cloud.CreateVM(ctx, r.caller(MachinePoolKind, lmp), cloud.VMSpec{Name: name, Flavor: flavor}); err != nil {
				return ctrl.Result{}, fmt.Errorf("creating VM %s of LoopMachinePool %s: %w", name, req.NamespacedName, err)
			}
		}
		ids = append(ids, ProviderIDPrefix+name)
	}
	ctx = context.WithoutCancel(ctx)
	if err := r.deleteVMs(ctx, MachinePoolKind, lmp, r.poolVMs(lmp, replicas)); err != nil {
		return ctrl.Result{}, err
	}
	if current, _, _ := unstructured.NestedSlice(lmp.Object, "spec", "providerIDList"); !reflect.DeepEqual(current, ids) {
		patch := client.MergeFrom(lmp.DeepCopy())
		if err := unstructured.SetNestedSlice(lmp.Object, ids, "spec", "providerIDList"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.client.Patch(ctx, lmp, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("recording providerIDList of LoopMachinePool %s: %w", req.NamespacedName, err)
		}
	}
	return ctrl.Result{}, r.patchStatus(ctx, lmp, map[string]any{
		statusInitialization: map[string]any{"provisioned": true},
		// The MachinePool controller of Cluster API v1.14 still reads the
		// infrastructure machine pool's readiness from status.ready
		// (external.IsReady), not from status.initialization.
		"ready":    true,
		"replicas": int64(replicas),
	}, ready())
}

// poolVMs returns the pool's VMs with an index of at least from (every VM
// of the pool when from is negative).
func (r *machinePoolReconciler) poolVMs(lmp *unstructured.Unstructured, from int) []cloud.VM {
	var out []cloud.VM
	for _, vm := range r.opts.Cloud.VMs() {
		if i := poolIndex(lmp, vm.Name); i >= 0 && i >= from {
			out = append(out, vm)
		}
	}
	return out
}

// poolIndex returns the instance index of a VM named <ns>/<pool>-<i>, or -1.
func poolIndex(lmp *unstructured.Unstructured, name string) int {
	rest, ok := strings.CutPrefix(name, vmName(lmp.GetNamespace(), lmp.GetName())+"-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 {
		return -1
	}
	return i
}
