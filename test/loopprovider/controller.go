package loopprovider

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// watch registers r as the controller of the loop kind, named after it in
// lower case, and counts its reconciles in Options.Activity. It reconciles
// the kind's objects that are not paused, and those whose owner (of owner's
// type, mapped to them by ownerToLoop) changes. The kinds owned by
// something other than a Cluster (LoopMachine, LoopMachinePool) are also
// reconciled when their Cluster is unpaused or its infrastructure
// provisioned, which they wait for.
func (b base) watch(ctx context.Context, mgr ctrl.Manager, co controller.Options,
	kind string, r reconcile.Reconciler, owner client.Object, ownerToLoop handler.MapFunc) error {
	watchedOwner, err := b.watched(owner)
	if err != nil {
		return fmt.Errorf("setting up the %s controller: %w", kind, err)
	}
	bld := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(kind)).
		For(newObject(kind), builder.WithPredicates(b.notPaused())).
		WithOptions(co).
		Watches(watchedOwner, handler.EnqueueRequestsFromMapFunc(b.onHub(owner, ownerToLoop)))
	if _, ownedByCluster := owner.(*clusterv1.Cluster); !ownedByCluster {
		cluster, err := b.watched(&clusterv1.Cluster{})
		if err != nil {
			return fmt.Errorf("setting up the %s controller: %w", kind, err)
		}
		bld = bld.Watches(cluster, handler.EnqueueRequestsFromMapFunc(b.clusterToLoop(kind)),
			builder.WithPredicates(b.hubPredicate(ctx, &clusterv1.Cluster{},
				predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), ctrl.LoggerFrom(ctx)))))
	}
	counted := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		defer b.opts.Activity.begin(kind, req)()
		return r.Reconcile(ctx, req)
	})
	if err := bld.Complete(counted); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", kind, err)
	}
	return nil
}

// clusterToLoop maps a Cluster to its loop objects of kind, found by the
// cluster name label.
func (b base) clusterToLoop(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := newList(kind)
		if err := b.client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, obj := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&obj)})
		}
		return out
	}
}

// fetch reads what a reconcile of a loop object starts from: the object of
// kind that req names, its Cluster API owner (found by ownerOf among the
// object's owner references) and the Cluster they belong to (the owner
// itself when it is a Cluster). A nil object and no error mean there is
// nothing to do: the object, its owner or its Cluster is gone, the owner's
// controller has not set the owner reference yet, or the provider must
// leave the object alone (paused).
func fetch[T any, O interface {
	*T
	client.Object
}](ctx context.Context, b base, kind string, req reconcile.Request,
	ownerOf func(context.Context, client.Client, metav1.ObjectMeta) (O, error)) (*unstructured.Unstructured, O, *clusterv1.Cluster, error) {
	obj := newObject(kind)
	if err := b.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return nil, nil, nil, client.IgnoreNotFound(err)
	}
	owner, err := ownerOf(ctx, b.client, metav1.ObjectMeta{Namespace: obj.GetNamespace(), OwnerReferences: obj.GetOwnerReferences()})
	if err != nil || owner == nil {
		return nil, nil, nil, client.IgnoreNotFound(err)
	}
	cluster, ownedByCluster := any(owner).(*clusterv1.Cluster)
	if !ownedByCluster {
		cluster, err = b.clusterOf(ctx, owner.GetNamespace(), owner.GetLabels())
		if err != nil {
			return nil, nil, nil, client.IgnoreNotFound(err)
		}
	}
	if b.paused(cluster, obj) {
		return nil, nil, nil, nil
	}
	return obj, owner, cluster, nil
}
