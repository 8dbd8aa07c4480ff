package main

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/testenv"
)

// savedWebhooks are the providers' admission webhook configurations of a
// cluster, removed for the baseline's move and put back after it.
type savedWebhooks struct {
	c          client.Client
	cluster    string
	validating []admissionregistrationv1.ValidatingWebhookConfiguration
	mutating   []admissionregistrationv1.MutatingWebhookConfiguration
}

// removeWebhooks deletes the admission webhook configurations the
// providers installed (those labelled clusterctl.cluster.x-k8s.io) and
// returns them, so that restore can create them again. What it deleted
// before an error is in the result too.
func removeWebhooks(ctx context.Context, m *testenv.Management) (*savedWebhooks, error) {
	s := &savedWebhooks{c: m.Client, cluster: m.Name}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := m.Client.List(ctx, validating, client.HasLabels{clusterctlv1.ClusterctlLabel}); err != nil {
		return nil, fmt.Errorf("listing the validating webhook configurations of %s: %w", m.Name, err)
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := m.Client.List(ctx, mutating, client.HasLabels{clusterctlv1.ClusterctlLabel}); err != nil {
		return nil, fmt.Errorf("listing the mutating webhook configurations of %s: %w", m.Name, err)
	}
	for i := range validating.Items {
		w := &validating.Items[i]
		if err := m.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return s, fmt.Errorf("deleting ValidatingWebhookConfiguration %s of %s: %w", w.Name, m.Name, err)
		}
		s.validating = append(s.validating, *w)
	}
	for i := range mutating.Items {
		w := &mutating.Items[i]
		if err := m.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return s, fmt.Errorf("deleting MutatingWebhookConfiguration %s of %s: %w", w.Name, m.Name, err)
		}
		s.mutating = append(s.mutating, *w)
	}
	return s, nil
}

// restore creates the saved configurations again.
func (s *savedWebhooks) restore(ctx context.Context) error {
	for i := range s.validating {
		w := s.validating[i].DeepCopy()
		w.ObjectMeta = fresh(w.ObjectMeta)
		if err := s.c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("restoring ValidatingWebhookConfiguration %s of %s: %w", w.Name, s.cluster, err)
		}
	}
	for i := range s.mutating {
		w := s.mutating[i].DeepCopy()
		w.ObjectMeta = fresh(w.ObjectMeta)
		if err := s.c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("restoring MutatingWebhookConfiguration %s of %s: %w", w.Name, s.cluster, err)
		}
	}
	return nil
}

// fresh keeps of meta what a create may carry.
func fresh(meta metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: meta.Name, Labels: meta.Labels, Annotations: meta.Annotations}
}
