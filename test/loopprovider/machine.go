package loopprovider

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/test/cloud"
)

type machineReconciler struct {
	base
}

// vmName is the name of a LoopMachine's VM, also the path of its providerID.
func vmName(namespace, name string) string { return namespace + "/" + name }

func (r *machineReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	lm, machine, cluster, err := fetch(ctx, r.base, MachineKind, req, ownerOf[clusterv1.Machine](r.base, "Machine"))
	if lm == nil || err != nil {
		return ctrl.Result{}, err
	}
	if !lm.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, lm)
	}
	return ctrl.Result{}, r.reconcileNormal(ctx, cluster, machine, lm)
}

func (r *machineReconciler) reconcileNormal(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine, lm *unstructured.Unstructured) error {
	if err := r.ensureFinalizer(ctx, lm, MachineFinalizer); err != nil {
		return err
	}
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return nil // The Cluster watch brings the LoopMachine back.
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		return nil // The Machine watch brings it back.
	}
	providerID, _, _ := unstructured.NestedString(lm.Object, "spec", "providerID")
	name := vmName(lm.GetNamespace(), lm.GetName())
	if providerID != "" {
		name = strings.TrimPrefix(providerID, ProviderIDPrefix)
	}
	var vm cloud.VM
	switch vms := r.opts.Cloud.FindVMs(name); {
	case len(vms) > 0:
		vm = vms[0]
	case providerID != "":
		// The VM went away behind the provider's back: report it, never
		// replace it silently (a Machine is replaced by its owner).
		return r.patchStatus(ctx, lm, nil, isFalse(VMNotFoundReason, fmt.Sprintf("VM %s not found in the cloud", name)))
	default:
		flavor, _, _ := unstructured.NestedString(lm.Object, "spec", "flavor")
		fd, _, _ := unstructured.NestedString(lm.Object, "spec", "failureDomain")
		created, err := r.opts.Cloud.CreateVM(ctx, r.caller(MachineKind, lm), cloud.VMSpec{Name: name, Flavor: flavor, FailureDomain: fd})
		if err != nil {
			return fmt.Errorf("creating the VM of LoopMachine %s: %w", client.ObjectKeyFromObject(lm), err)
		}
		vm = created
	}
	// The cloud has acted: record it even if the manager is shutting down,
	// or the VM would be created again by the next reconcile somewhere.
	ctx = context.WithoutCancel(ctx)
	if providerID == "" {
		patch := client.MergeFrom(lm.DeepCopy())
		if err := unstructured.SetNestedField(lm.Object, ProviderIDPrefix+name, "spec", "providerID"); err != nil {
			return err
		}
		if err := r.client.Patch(ctx, lm, patch); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("recording providerID of LoopMachine %s: %w", client.ObjectKeyFromObject(lm), err)
		}
	}
	cond := ready()
	if vm.Power != cloud.PoweredOn {
		cond = isFalse(PoweredOffReason, fmt.Sprintf("VM %s is powered off", vm.ID))
	}
	return r.patchStatus(ctx, lm, map[string]any{
		statusInitialization: map[string]any{"provisioned": true},
		"addresses": []any{
			map[string]any{"type": "InternalIP", "address": vm.Address},
			map[string]any{"type": "Hostname", "address": lm.GetName()},
		},
	}, cond)
}

func (r *machineReconciler) reconcileDelete(ctx context.Context, lm *unstructured.Unstructured) error {
	if !r.deletedForMove(lm) {
		name := vmName(lm.GetNamespace(), lm.GetName())
		if providerID, _, _ := unstructured.NestedString(lm.Object, "spec", "providerID"); providerID != "" {
			name = strings.TrimPrefix(providerID, ProviderIDPrefix)
		}
		if err := r.deleteVMs(ctx, MachineKind, lm, r.opts.Cloud.FindVMs(name)); err != nil {
			return err
		}
	}
	return r.removeFinalizer(context.WithoutCancel(ctx), lm, MachineFinalizer)
}

// deleteVMs powers each VM off and deletes it, as CAPV does.
func (b base) deleteVMs(ctx context.Context, kind string, obj client.Object, vms []cloud.VM) error {
	caller := b.caller(kind, obj)
	for _, vm := range vms {
		if err := b.opts.Cloud.PowerOffVM(ctx, caller, vm.ID); err != nil && !isNotFound(err) {
			return fmt.Errorf("powering off VM %s of %s %s: %w", vm.ID, kind, client.ObjectKeyFromObject(obj), err)
		}
		if err := b.opts.Cloud.DeleteVM(ctx, caller, vm.ID); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting VM %s of %s %s: %w", vm.ID, kind, client.ObjectKeyFromObject(obj), err)
		}
	}
	return nil
}
