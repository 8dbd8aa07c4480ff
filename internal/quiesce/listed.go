package quiesce

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ListingDeployments returns a client that answers every Get of a
// Deployment from one LIST of the Deployments selector matches, made at
// the first such Get, and passes every other request through to c.
//
// A wait reads each controller's Deployment at every look, and the
// controllers are found by a label (spec.controllers.selector): with a
// handful of providers in each cluster, one list per look costs one
// request where a read each cost one per provider. The list is the API
// server's answer at one instant, as each read was at its own.
//
// A Deployment the list does not hold (a manager, which the selector need
// not match, or a provider whose label was taken off meanwhile) is read on
// its own, so that only the server says one is gone, and kept as a listed
// one is for the rest of the look. A Deployment written
// through the client is answered afterwards with the server's answer to
// that write; one whose write failed is read again from the server (a
// conflict must see the new resourceVersion). Make one per look, never
// one per run: it never lists again.
func ListingDeployments(c client.Client, selector labels.Selector) client.Client {
	return &listingDeployments{Client: c, selector: selector}
}

type listingDeployments struct {
	client.Client
	selector labels.Selector

	mu     sync.Mutex
	listed map[types.NamespacedName]*appsv1.Deployment
}

func (l *listingDeployments) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || len(opts) > 0 {
		return l.Client.Get(ctx, key, obj, opts...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listed == nil {
		if err := l.list(ctx); err != nil {
			return err
		}
	}
	if found, ok := l.listed[key]; ok {
		found.DeepCopyInto(d)
		return nil
	}
	if err := l.Client.Get(ctx, key, d); err != nil {
		return err
	}
	l.listed[key] = d.DeepCopy()
	return nil
}

// List passes through; a list of the Deployments the selector matches in
// every namespace, as SelectControllers makes, is kept as the look's list.
func (l *listingDeployments) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	deployments, ok := list.(*appsv1.DeploymentList)
	if !ok || !l.sameSelection(opts) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keep(deployments.DeepCopy())
	return nil
}

// sameSelection reports whether opts ask for exactly the Deployments the
// look lists: those its selector matches, in every namespace, whole.
func (l *listingDeployments) sameSelection(opts []client.ListOption) bool {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	return o.Namespace == "" && o.FieldSelector == nil && o.Limit == 0 && o.Continue == "" && o.Raw == nil &&
		o.LabelSelector != nil && o.LabelSelector.String() == l.selector.String()
}

func (l *listingDeployments) list(ctx context.Context) error {
	list := &appsv1.DeploymentList{}
	if err := l.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: l.selector}); err != nil {
		return fmt.Errorf("listing controller Deployments matching %q: %w", l.selector, err)
	}
	l.keep(list)
	return nil
}

func (l *listingDeployments) keep(list *appsv1.DeploymentList) {
	l.listed = make(map[types.NamespacedName]*appsv1.Deployment, len(list.Items))
	for i := range list.Items {
		l.listed[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
}

func (l *listingDeployments) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := l.Client.Patch(ctx, obj, patch, opts...)
	l.wrote(obj, len(opts) == 0 && err == nil)
	return err
}

func (l *listingDeployments) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := l.Client.Update(ctx, obj, opts...)
	l.wrote(obj, len(opts) == 0 && err == nil)
	return err
}

// wrote keeps the server's answer to a write of a listed Deployment when
// it is what the server now holds (ok: the write succeeded, and was no dry
// run or other variant), and otherwise forgets the Deployment, so that it
// is read again.
func (l *listingDeployments) wrote(obj client.Object, ok bool) {
	d, isDeployment := obj.(*appsv1.Deployment)
	if !isDeployment {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := client.ObjectKeyFromObject(d)
	if _, listed := l.listed[key]; !listed {
		return
	}
	if !ok {
		delete(l.listed, key)
		return
	}
	l.listed[key] = d.DeepCopy()
}
