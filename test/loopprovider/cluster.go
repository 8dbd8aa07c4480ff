package loopprovider

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type clusterReconciler struct {
	base
}

func (r *clusterReconciler) setup(ctx context.Context, mgr ctrl.Manager, co controller.Options) error {
	gvk := GroupVersion.WithKind(ClusterKind)
	err := ctrl.NewControllerManagedBy(mgr).
		Named("loopcluster").
		For(newObject(ClusterKind), builder.WithPredicates(r.notPaused())).
		WithOptions(co).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(
			util.ClusterToInfrastructureMapFunc(ctx, gvk, mgr.GetClient(), newObject(ClusterKind)))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the LoopCluster controller: %w", err)
	}
	return nil
}

func (r *clusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	defer r.opts.Activity.begin(ClusterKind, req)()
	lc := newObject(ClusterKind)
	if err := r.client.Get(ctx, req.NamespacedName, lc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, err := util.GetOwnerCluster(ctx, r.client, metav1.ObjectMeta{Namespace: lc.GetNamespace(), OwnerReferences: lc.GetOwnerReferences()})
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cluster == nil {
		return ctrl.Result{}, nil // The Cluster controller sets the owner reference first.
	}
	if r.paused(cluster, lc) {
		return ctrl.Result{}, nil
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
	if len(status) > 0 {
		fields["failureDomains"] = status
	}
	return ctrl.Result{}, r.patchStatus(ctx, lc, fields, ready())
}
