package hostprovider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// Options configure the controller.
type Options struct {
	// Cloud provisions the hosts. Required.
	Cloud *cloud.Cloud
	// ManagementCluster names the cluster the controller runs for, in the
	// cloud's event log.
	ManagementCluster string
	// Activity, if set, counts the reconciles.
	Activity *Activity
}

// Activity counts the reconciles of each host that have returned, whatever
// they decided: a test reads it to know the controller has looked at a
// host, including when it left the host alone.
type Activity struct {
	mu         sync.Mutex
	reconciled map[client.ObjectKey]int64
}

// Reconciled is the number of reconciles of the host namespace/name that
// have returned so far.
func (a *Activity) Reconciled(namespace, name string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reconciled[client.ObjectKey{Namespace: namespace, Name: name}]
}

func (a *Activity) done(key client.ObjectKey) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reconciled == nil {
		a.reconciled = map[client.ObjectKey]int64{}
	}
	a.reconciled[key]++
}

// consumerGVK is the kind that consumes hosts here, as CAPM3's
// Metal3Machine does in Metal3.
var consumerGVK = loopprovider.GroupVersion.WithKind(loopprovider.MachineKind)

// SetupWithManager registers the BareMetalHost controller with mgr, whose
// cache serves unstructured objects (client.CacheOptions.Unstructured).
func SetupWithManager(_ context.Context, mgr ctrl.Manager, opts Options, co controller.Options) error {
	if opts.Cloud == nil {
		return errors.New("setting up the BareMetalHost controller: no cloud")
	}
	r := &reconciler{cache: mgr.GetClient(), reader: mgr.GetAPIReader(), writer: mgr.GetClient(), opts: opts}
	consumer := &unstructured.Unstructured{}
	consumer.SetGroupVersionKind(consumerGVK)
	err := ctrl.NewControllerManagedBy(mgr).
		Named("baremetalhost").
		For(newHost()).
		Watches(consumer, handler.EnqueueRequestsFromMapFunc(r.hostsOf)).
		WithOptions(co).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the BareMetalHost controller: %w", err)
	}
	return nil
}

type reconciler struct {
	// cache finds the hosts of a consumer; reader reads what a decision
	// rests on, from the API server.
	cache  client.Reader
	reader client.Reader
	writer client.Client
	opts   Options
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	defer r.opts.Activity.done(req.NamespacedName)
	// A provision wipes a disk: the decision rests on what the API server
	// holds now, not on a cache that may not have seen the status the
	// last provision wrote.
	host := newHost()
	if err := r.reader.Get(ctx, req.NamespacedName, host); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !host.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil // No finalizer: a deleted host releases nothing.
	}
	ref, ok := specConsumer(host)
	if !ok {
		return ctrl.Result{}, nil // Nobody asked for the host yet.
	}
	consumer := &unstructured.Unstructured{}
	consumer.SetAPIVersion(ref.APIVersion)
	consumer.SetKind(ref.Kind)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, consumer); err != nil {
		// A consumer not there yet brings the host back when it comes.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if provisionedFor(host, string(consumer.GetUID())) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.provision(ctx, host, consumer)
}

// provisionedFor reports whether the host's status says its disk holds
// its image for the consumer of that UID: anything else, a status lost
// included, is a host to provision.
func provisionedFor(host *unstructured.Unstructured, consumerUID string) bool {
	return ProvisioningState(host) == StateProvisioned && ProvisionedForUID(host) == consumerUID
}

// provision writes the host's image through the cloud and records it in
// the host's status.
func (r *reconciler) provision(ctx context.Context, host, consumer *unstructured.Unstructured) error {
	key := client.ObjectKeyFromObject(host)
	image, _, _ := unstructured.NestedString(host.Object, "spec", "image")
	online, _, _ := unstructured.NestedBool(host.Object, "spec", "online")
	caller := cloud.Caller{ManagementCluster: r.opts.ManagementCluster, Kind: Kind, Namespace: host.GetNamespace(), Name: host.GetName()}
	if err := r.opts.Cloud.Provision(ctx, caller, key.String(), image); err != nil {
		return fmt.Errorf("provisioning BareMetalHost %s: %w", key, err)
	}
	// The disk is written: record it even if the manager is shutting
	// down, or the next reconcile somewhere provisions it once more.
	ctx = context.WithoutCancel(ctx)
	patch := client.MergeFrom(host.DeepCopy())
	host.Object["status"] = map[string]any{
		"provisioning": map[string]any{"state": StateProvisioned, "image": image},
		"consumerRef": map[string]any{
			"apiVersion": consumer.GetAPIVersion(),
			"kind":       consumer.GetKind(),
			"namespace":  consumer.GetNamespace(),
			"name":       consumer.GetName(),
			"uid":        string(consumer.GetUID()),
		},
		"poweredOn": online,
	}
	if err := r.writer.Status().Patch(ctx, host, patch); err != nil {
		return fmt.Errorf("recording the provisioning of BareMetalHost %s: %w", key, client.IgnoreNotFound(err))
	}
	return nil
}

// hostsOf maps a consumer to the hosts that name it.
func (r *reconciler) hostsOf(ctx context.Context, consumer client.Object) []reconcile.Request {
	hosts := NewList()
	if err := r.cache.List(ctx, hosts, client.InNamespace(consumer.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range hosts.Items {
		ref, ok := specConsumer(&hosts.Items[i])
		if ok && ref.Kind == consumerGVK.Kind && ref.Name == consumer.GetName() && ref.Namespace == consumer.GetNamespace() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
		}
	}
	return out
}
