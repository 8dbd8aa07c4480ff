package loopprovider

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/internal/convert"
)

// Contract is the Cluster API contract the provider implements for the
// Cluster API it runs beside: the version it reads Cluster API's kinds at,
// and the status fields it reports readiness with.
type Contract string

const (
	// ContractV1Beta2 is the contract of Cluster API v1.11 and newer (the
	// default): Cluster API's kinds read at v1beta2, readiness in
	// status.initialization.provisioned.
	ContractV1Beta2 Contract = "v1beta2"
	// ContractV1Beta1 is the contract of Cluster API v1.10 and older, which
	// serve Cluster API's kinds at v1beta1 only and read an infrastructure
	// object's readiness from status.ready: the provider reads them at
	// v1beta1 and converts them with Cluster API's own code (package
	// convert) to the v1beta2 types its reconcilers work on, and reports
	// status.ready beside status.initialization.provisioned, as providers
	// that support both contracts do during the transition. A LoopCluster's
	// failure domains are not reported: v1beta1 wants them as a map, which
	// the LoopCluster CRD (a v1beta2 list) does not hold.
	ContractV1Beta1 Contract = "v1beta1"
)

// v1beta1 reports whether the provider follows the older contract.
func (b base) v1beta1() bool { return b.opts.Contract == ContractV1Beta1 }

// get reads the Cluster API object key names into hub, a v1beta2 type, at
// the version the provider's contract reads it at.
func (b base) get(ctx context.Context, key client.ObjectKey, hub client.Object) error {
	if !b.v1beta1() {
		return b.client.Get(ctx, key, hub)
	}
	gvk, err := apiutil.GVKForObject(hub, b.client.Scheme())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk.GroupKind().WithVersion(string(ContractV1Beta1)))
	if err := b.client.Get(ctx, key, u); err != nil {
		return err
	}
	return toHub(ctx, u, hub)
}

// toHub converts u, a Cluster API object at v1beta1, into hub with Cluster
// API's conversion.
func toHub(ctx context.Context, u *unstructured.Unstructured, hub client.Object) error {
	up, err := convert.Convert(ctx, u, clusterv1.GroupVersion.Version, nil)
	if err != nil {
		return fmt.Errorf("converting %s %s to %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), clusterv1.GroupVersion.Version, err)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(up.Object, hub)
}

// ownerOf returns what reads the owner of kind (a Cluster API kind) of an
// object with the given metadata, as its v1beta2 type T: nil if it has no
// such owner. It matches owner references by group and kind, whatever
// their version, as Cluster API's util.GetOwnerMachine does.
func ownerOf[T any, O interface {
	*T
	client.Object
}](b base, kind string) func(context.Context, client.Client, metav1.ObjectMeta) (O, error) {
	return func(ctx context.Context, _ client.Client, meta metav1.ObjectMeta) (O, error) {
		for _, ref := range meta.OwnerReferences {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || ref.Kind != kind || gv.Group != clusterv1.GroupVersion.Group {
				continue
			}
			owner := O(new(T))
			if err := b.get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: ref.Name}, owner); err != nil {
				return nil, err
			}
			return owner, nil
		}
		return nil, nil
	}
}

// clusterOf reads the Cluster an object with labels belongs to.
func (b base) clusterOf(ctx context.Context, namespace string, labels map[string]string) (*clusterv1.Cluster, error) {
	name := labels[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil, fmt.Errorf("no %s label in namespace %s", clusterv1.ClusterNameLabel, namespace)
	}
	cluster := &clusterv1.Cluster{}
	if err := b.get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return nil, err
	}
	return cluster, nil
}

// watched is what the controllers watch for hub, a Cluster API kind: hub
// itself, or under the older contract the kind at v1beta1, unstructured.
func (b base) watched(hub client.Object) (client.Object, error) {
	if !b.v1beta1() {
		return hub, nil
	}
	gvk, err := apiutil.GVKForObject(hub, b.client.Scheme())
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk.GroupKind().WithVersion(string(ContractV1Beta1)))
	return u, nil
}

// onHub lets f, written for hub's type (as Cluster API's map functions
// are), map the objects watched for it.
func (b base) onHub(hub client.Object, f handler.MapFunc) handler.MapFunc {
	if !b.v1beta1() {
		return f
	}
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		h, ok := hubOf(ctx, hub, o)
		if !ok {
			return nil
		}
		return f(ctx, h)
	}
}

// hubOf converts o, watched for hub (see watched), to hub's type.
func hubOf(ctx context.Context, hub, o client.Object) (client.Object, bool) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, true
	}
	h := hub.DeepCopyObject().(client.Object)
	if err := toHub(ctx, u, h); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading a watched object")
		return nil, false
	}
	return h, true
}

// hubPredicate lets p, written for hub's type (as Cluster API's predicates
// are), filter the events of the objects watched for it.
func (b base) hubPredicate(ctx context.Context, hub client.Object, p predicate.Predicate) predicate.Predicate {
	if !b.v1beta1() {
		return p
	}
	conv := func(o client.Object) (client.Object, bool) {
		if o == nil {
			return nil, true
		}
		return hubOf(ctx, hub, o)
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			o, ok := conv(e.Object)
			return ok && p.Create(event.CreateEvent{Object: o})
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			older, ok1 := conv(e.ObjectOld)
			newer, ok2 := conv(e.ObjectNew)
			return ok1 && ok2 && p.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: newer})
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			o, ok := conv(e.Object)
			return ok && p.Delete(event.DeleteEvent{Object: o, DeleteStateUnknown: e.DeleteStateUnknown})
		},
		GenericFunc: func(e event.GenericEvent) bool {
			o, ok := conv(e.Object)
			return ok && p.Generic(event.GenericEvent{Object: o})
		},
	}
}

// contractStatus adds to fields, the status a reconcile reports, what the
// provider's contract reads besides: under v1beta1, status.ready mirrors
// status.initialization.provisioned.
func (b base) contractStatus(fields map[string]any) {
	if !b.v1beta1() || fields == nil {
		return
	}
	if init, ok := fields[statusInitialization].(map[string]any); ok {
		if provisioned, ok := init["provisioned"].(bool); ok {
			fields["ready"] = provisioned
		}
	}
}
