package capioperator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Provider is one provider object of cluster-api-operator.
type Provider struct {
	// Kind is one of Kinds, e.g. "InfrastructureProvider".
	Kind string
	// Namespace and Name of the object; the name is the provider's name
	// ("cluster-api", "kubeadm", "aws").
	Namespace, Name string
	// Version is both what the object asks for and what it reports
	// installed (status.installedVersion), as cluster-api-operator leaves it
	// once it has installed the provider.
	Version string
}

func (p Provider) String() string { return fmt.Sprintf("%s %s/%s", p.Kind, p.Namespace, p.Name) }

func (p Provider) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK(p.Kind))
	u.SetNamespace(p.Namespace)
	u.SetName(p.Name)
	return u
}

// CreateProviders creates the provider objects, installed at their version.
func CreateProviders(ctx context.Context, c client.Client, providers []Provider) error {
	for _, p := range providers {
		u := p.object()
		if err := unstructured.SetNestedField(u.Object, p.Version, "spec", "version"); err != nil {
			return err
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s: %w", p, err)
		}
		if err := unstructured.SetNestedField(u.Object, p.Version, "status", "installedVersion"); err != nil {
			return err
		}
		if err := c.Status().Update(ctx, u); err != nil {
			return fmt.Errorf("setting status.installedVersion of %s: %w", p, err)
		}
	}
	return nil
}

// DeleteProviders deletes the provider objects; those already gone are fine.
func DeleteProviders(ctx context.Context, c client.Client, providers []Provider) error {
	for _, p := range providers {
		if err := c.Delete(ctx, p.object()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", p, err)
		}
	}
	return nil
}
