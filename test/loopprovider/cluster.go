package loopprovider

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type clusterReconciler struct {
	base
}

func (r *clusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	lc, _, _, err := fetch(ctx, r.base, ClusterKind, req, ownerOf[clusterv1.Cluster](r.base, "Cluster"))
	if lc == nil || err != nil {
		return ctrl.Result{}, err
	}
	if !lc.GetDeletionTimestamp().IsZero() {
		// A LoopCluster holds nothing in the cloud.
		return ctrl.Result{}, r.removeFinalizer(ctx, lc, ClusterFinalizer)
	}
	if err := r.ensureFinalizer(ctx, lc, ClusterFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	domains, _, _ := unstructured.NestedStringSlice(lc.Object, "spec", "failureDomains")
	status := make([]any, len(domains))
	for i, d := range domains {
		// The first zone hosts control planes, as a provider's default
		// placement would put them in one zone's dedicated subnet.
		status[i] = map[string]any{"name": d, "controlPlane": i == 0}
	}
	fields := map[string]any{statusInitialization: map[string]any{"provisioned": true}}
	if len(status) > 0 && !r.v1beta1() {
		fields["failureDomains"] = status
	}
	return ctrl.Result{}, r.patchStatus(ctx, lc, fields, ready())
}
