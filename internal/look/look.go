// Package look answers the repeated reads of one step of a move from one
// read each: a client that reads a cluster's controller Deployments,
// webhook configurations and Services from the API server once per step.
// It never caches across steps and never holds anything a move needs to
// continue.
package look

import (
	"context"
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// New returns a client for one look at a cluster's controllers and the
// webhooks they serve: one step of a move, which reads the same few
// objects several times over (a wait reads each controller's Deployment;
// finding the managers and the webhooks of the controllers both list the
// webhook configurations and read their Services; installing the bypass
// reads each configuration again before writing it). The look reads each
// of them from the API server once and answers the step's later reads of
// it from what it read; every other request goes through to c.
//
//   - Deployments: one LIST of those selector matches (the controllers'
//     label, spec.controllers.selector), made at the first read of one, or
//     the step's own list of them (quiesce.SelectControllers). A Deployment the
//     list does not hold (a manager, which the selector need not match, or
//     a provider whose label was taken off meanwhile) is read on its own,
//     so that only the server says one is gone.
//   - Validating and mutating webhook configurations: the first list of
//     each kind; a read of one by name is answered from it.
//   - Services: each read once.
//
// What the look read is the API server's answer at one instant, as each
// read was at its own. An object written through the look is answered
// afterwards with the server's answer to that write (what the server now
// holds); one whose write failed is read again from the server, so a
// conflict sees the new resourceVersion. A write with options (a dry run)
// is not the server's state: the object is read again too. Make one per
// step and cluster, never one per run: it never reads again what it read.
func New(c client.Client, selector labels.Selector) client.Client {
	return &look{Client: c, selector: selector, services: map[types.NamespacedName]*corev1.Service{}}
}

type look struct {
	client.Client
	selector labels.Selector

	mu          sync.Mutex
	deployments map[types.NamespacedName]*appsv1.Deployment
	validating  *admissionregistrationv1.ValidatingWebhookConfigurationList
	mutating    *admissionregistrationv1.MutatingWebhookConfigurationList
	services    map[types.NamespacedName]*corev1.Service
}

func (l *look) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if len(opts) > 0 {
		return l.Client.Get(ctx, key, obj, opts...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return l.getDeployment(ctx, key, o)
	case *corev1.Service:
		if found, ok := l.services[key]; ok {
			found.DeepCopyInto(o)
			return nil
		}
		if err := l.Client.Get(ctx, key, o); err != nil {
			return err
		}
		l.services[key] = o.DeepCopy()
		return nil
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		if l.validating != nil {
			if found := findNamed(l.validating.Items, key.Name); found != nil {
				found.DeepCopyInto(o)
				return nil
			}
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		if l.mutating != nil {
			if found := findNamed(l.mutating.Items, key.Name); found != nil {
				found.DeepCopyInto(o)
				return nil
			}
		}
	}
	return l.Client.Get(ctx, key, obj)
}

func (l *look) getDeployment(ctx context.Context, key client.ObjectKey, d *appsv1.Deployment) error {
	if l.deployments == nil {
		list := &appsv1.DeploymentList{}
		if err := l.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: l.selector}); err != nil {
			return fmt.Errorf("listing controller Deployments matching %q: %w", l.selector, err)
		}
		l.keepDeployments(list)
	}
	if found, ok := l.deployments[key]; ok {
		found.DeepCopyInto(d)
		return nil
	}
	if err := l.Client.Get(ctx, key, d); err != nil {
		return err
	}
	l.deployments[key] = d.DeepCopy()
	return nil
}

// findNamed returns the item of items named name, or nil.
func findNamed[T any, P interface {
	*T
	GetName() string
}](items []T, name string) P {
	for i := range items {
		if p := P(&items[i]); p.GetName() == name {
			return p
		}
	}
	return nil
}

// List answers a list of either kind of webhook configuration from the
// look's, listing it the first time; a list of the Deployments the
// selector matches in every namespace, as quiesce.SelectControllers makes, is kept
// as the look's list of them. Every other list goes through.
func (l *look) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch o := list.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfigurationList:
		if len(opts) > 0 {
			break
		}
		if l.validating == nil {
			fresh := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
			if err := l.Client.List(ctx, fresh); err != nil {
				return err
			}
			l.validating = fresh
		}
		l.validating.DeepCopyInto(o)
		return nil
	case *admissionregistrationv1.MutatingWebhookConfigurationList:
		if len(opts) > 0 {
			break
		}
		if l.mutating == nil {
			fresh := &admissionregistrationv1.MutatingWebhookConfigurationList{}
			if err := l.Client.List(ctx, fresh); err != nil {
				return err
			}
			l.mutating = fresh
		}
		l.mutating.DeepCopyInto(o)
		return nil
	case *appsv1.DeploymentList:
		if err := l.Client.List(ctx, o, opts...); err != nil {
			return err
		}
		if l.selectsControllers(opts) {
			l.keepDeployments(o.DeepCopy())
		}
		return nil
	}
	return l.Client.List(ctx, list, opts...)
}

// selectsControllers reports whether opts ask for exactly the Deployments
// the look lists: those its selector matches, in every namespace, whole.
func (l *look) selectsControllers(opts []client.ListOption) bool {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	return o.Namespace == "" && o.FieldSelector == nil && o.Limit == 0 && o.Continue == "" && o.Raw == nil &&
		o.LabelSelector != nil && o.LabelSelector.String() == l.selector.String()
}

func (l *look) keepDeployments(list *appsv1.DeploymentList) {
	l.deployments = make(map[types.NamespacedName]*appsv1.Deployment, len(list.Items))
	for i := range list.Items {
		l.deployments[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
}

func (l *look) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := l.Client.Patch(ctx, obj, patch, opts...)
	l.wrote(obj, len(opts) == 0 && err == nil)
	return err
}

func (l *look) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := l.Client.Update(ctx, obj, opts...)
	l.wrote(obj, len(opts) == 0 && err == nil)
	return err
}

// wrote keeps the server's answer to a write of an object the look read
// when it is what the server now holds (ok: the write succeeded, and was
// no dry run or other variant), and otherwise forgets the object, so that
// it is read again.
func (l *look) wrote(obj client.Object, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if _, read := l.deployments[key]; read {
			if ok {
				l.deployments[key] = o.DeepCopy()
			} else {
				delete(l.deployments, key)
			}
		}
	case *corev1.Service:
		delete(l.services, key)
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		if l.validating != nil && !replaceNamed(l.validating.Items, o, ok) {
			l.validating = nil
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		if l.mutating != nil && !replaceNamed(l.mutating.Items, o, ok) {
			l.mutating = nil
		}
	}
}

// replaceNamed puts written in the place of the item of its name when ok,
// and reports whether it did; false (the list must be read again) when the
// write failed or the list has no such item.
func replaceNamed[T any, P interface {
	*T
	GetName() string
	DeepCopyInto(*T)
}](items []T, written P, ok bool) bool {
	if !ok {
		return false
	}
	for i := range items {
		if P(&items[i]).GetName() == written.GetName() {
			written.DeepCopyInto(&items[i])
			return true
		}
	}
	return false
}

// Through returns the client a look (New) reads through, or c itself
// when it is no look: what a caller keeps per cluster client is kept per
// the client, not per look.
func Through(c client.Client) client.Client {
	if l, ok := c.(*look); ok {
		return l.Client
	}
	return c
}
