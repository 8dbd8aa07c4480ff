package loopprovider

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/test/cloud"
)

type machinePoolReconciler struct {
	base
}

func (r *machinePoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	lmp, mp, cluster, err := fetch(ctx, r.base, MachinePoolKind, req, ownerOf[clusterv1.MachinePool](r.base, "MachinePool"))
	if lmp == nil || err != nil {
		return ctrl.Result{}, err
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
