package quiesce

import (
	"context"
	"fmt"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Managers are Deployments that reconcile the provider Deployments (or the
// Cluster API objects) themselves: cluster-api-operator applies a
// provider's manifests again, replicas included, whenever it reconciles the
// provider (when it starts, on each resync, on any change of the provider
// object), so a stopped provider would be started again in the middle of a
// move. They are stopped before the providers, and restarted after them.

// CAPIOperatorLabel, with value CAPIOperatorLabelValue, is on every object
// of cluster-api-operator as both of its installers ship it: the release
// manifests (kustomize's common labels) and the Helm chart.
const (
	CAPIOperatorLabel      = "clusterctl.cluster.x-k8s.io/core"
	CAPIOperatorLabelValue = "capi-operator"
)

// capiOperatorGroup is the API group of cluster-api-operator's provider
// objects, whose admission webhooks its own Deployment serves.
const capiOperatorGroup = "operator.cluster.x-k8s.io"

// FindCAPIOperator returns the Deployments of cluster-api-operator in a
// cluster, sorted: those carrying its installers' label, and those serving
// the admission webhooks of its API group (clientConfig.service names a
// Service whose selector matches the Deployment's pods).
//
// Both, because each misses what the other finds: the label is on every
// installation made by its release manifests or Helm chart, whatever the
// names and namespace chosen, but a distribution that repackages it (and
// renames or relabels it) drops it; the webhooks tie a Deployment to the
// API it serves however it was installed, but an installation may disable
// them. The container image is no help: mirrored and air-gapped registries
// rename it. Only webhooks that name the group explicitly count, never a
// wildcard: a policy engine that watches every group is no provider manager.
func FindCAPIOperator(ctx context.Context, c client.Reader) ([]types.NamespacedName, error) {
	found := map[types.NamespacedName]bool{}
	labelled := &appsv1.DeploymentList{}
	if err := c.List(ctx, labelled, client.MatchingLabels{CAPIOperatorLabel: CAPIOperatorLabelValue}); err != nil {
		return nil, fmt.Errorf("listing cluster-api-operator Deployments (label %s=%s): %w", CAPIOperatorLabel, CAPIOperatorLabelValue, err)
	}
	for i := range labelled.Items {
		found[client.ObjectKeyFromObject(&labelled.Items[i])] = true
	}

	services, err := operatorWebhookServices(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, key := range services {
		svc := &corev1.Service{}
		if err := c.Get(ctx, key, svc); err != nil {
			if apierrors.IsNotFound(err) {
				continue // a webhook pointing nowhere is nobody's
			}
			return nil, fmt.Errorf("getting Service %s of cluster-api-operator's webhooks: %w", key, err)
		}
		if len(svc.Spec.Selector) == 0 {
			continue // hand-made endpoints: not a Deployment's
		}
		deployments := &appsv1.DeploymentList{}
		if err := c.List(ctx, deployments, client.InNamespace(svc.Namespace)); err != nil {
			return nil, fmt.Errorf("listing Deployments in namespace %s: %w", svc.Namespace, err)
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for i := range deployments.Items {
			d := &deployments.Items[i]
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				found[client.ObjectKeyFromObject(d)] = true
			}
		}
	}
	out := make([]types.NamespacedName, 0, len(found))
	for k := range found {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// operatorWebhookServices returns the Services of the admission webhooks
// whose rules name cluster-api-operator's API group.
func operatorWebhookServices(ctx context.Context, c client.Reader) ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	add := func(cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations) {
		if cc.Service == nil {
			return
		}
		for _, r := range rules {
			if slices.Contains(r.APIGroups, capiOperatorGroup) {
				key := types.NamespacedName{Namespace: cc.Service.Namespace, Name: cc.Service.Name}
				if !slices.Contains(out, key) {
					out = append(out, key)
				}
				return
			}
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, v); err != nil {
		return nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range v.Items {
		for _, w := range cfg.Webhooks {
			add(w.ClientConfig, w.Rules)
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, m); err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range m.Items {
		for _, w := range cfg.Webhooks {
			add(w.ClientConfig, w.Rules)
		}
	}
	return out, nil
}

// GetControllers reads the named Deployments as controllers (with the
// replica count recorded on them, if any), flagged as managers when manager
// is set. It returns separately the names of those that do not exist.
func GetControllers(ctx context.Context, c client.Reader, keys []types.NamespacedName, manager bool) ([]Controller, []types.NamespacedName, error) {
	var out []Controller
	var missing []types.NamespacedName
	for _, key := range keys {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			if apierrors.IsNotFound(err) {
				missing = append(missing, key)
				continue
			}
			return nil, nil, fmt.Errorf("getting Deployment %s: %w", key, err)
		}
		ctrl := Controller{Key: key, Replicas: ptr.Deref(d.Spec.Replicas, 1), Manager: manager}
		recorded, ok, err := recordedReplicas(d)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			ctrl.Recorded = ptr.To(recorded)
		}
		out = append(out, ctrl)
	}
	return out, missing, nil
}

// SplitManagers separates the managers from the providers they manage.
func SplitManagers(controllers []Controller) (providers, managers []Controller) {
	for _, c := range controllers {
		if c.Manager {
			managers = append(managers, c)
		} else {
			providers = append(providers, c)
		}
	}
	return providers, managers
}
