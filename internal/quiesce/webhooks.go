package quiesce

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// WebhookKind says which kind of configuration a webhook belongs to.
type WebhookKind string

const (
	// Validating is a ValidatingWebhookConfiguration.
	Validating WebhookKind = "ValidatingWebhookConfiguration"
	// Mutating is a MutatingWebhookConfiguration.
	Mutating WebhookKind = "MutatingWebhookConfiguration"
)

// WebhookRef names one webhook of one configuration.
type WebhookRef struct {
	Kind          WebhookKind
	Configuration string
	Webhook       string
}

func (r WebhookRef) String() string {
	return fmt.Sprintf("%s %s: webhook %s", r.Kind, r.Configuration, r.Webhook)
}

// Webhooks sorts the admission webhooks of a cluster by who serves them.
type Webhooks struct {
	// Served are the webhooks served by one of the controllers: they go down
	// with them and get the bypass.
	Served []WebhookRef
	// ByURL are webhooks given by URL: nothing tells which Deployment serves
	// them, so they cannot be bypassed; the plan reports them.
	ByURL []WebhookRef
}

// webhookEntry is what this package reads and writes of a webhook, common to
// the validating and mutating types.
type webhookEntry struct {
	name           string
	clientConfig   *admissionregistrationv1.WebhookClientConfig
	objectSelector **metav1.LabelSelector
}

// configuration is a validating or mutating webhook configuration, seen
// through what this package needs of it.
type configuration struct {
	kind    WebhookKind
	object  client.Object
	entries []webhookEntry
}

func listConfigurations(ctx context.Context, c client.Reader) ([]configuration, error) {
	var out []configuration
	vList := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, vList); err != nil {
		return nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	for i := range vList.Items {
		out = append(out, validatingConfiguration(&vList.Items[i]))
	}
	mList := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, mList); err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for i := range mList.Items {
		out = append(out, mutatingConfiguration(&mList.Items[i]))
	}
	return out, nil
}

func validatingConfiguration(o *admissionregistrationv1.ValidatingWebhookConfiguration) configuration {
	cfg := configuration{kind: Validating, object: o}
	for i := range o.Webhooks {
		w := &o.Webhooks[i]
		cfg.entries = append(cfg.entries, webhookEntry{name: w.Name, clientConfig: &w.ClientConfig, objectSelector: &w.ObjectSelector})
	}
	return cfg
}

func mutatingConfiguration(o *admissionregistrationv1.MutatingWebhookConfiguration) configuration {
	cfg := configuration{kind: Mutating, object: o}
	for i := range o.Webhooks {
		w := &o.Webhooks[i]
		cfg.entries = append(cfg.entries, webhookEntry{name: w.Name, clientConfig: &w.ClientConfig, objectSelector: &w.ObjectSelector})
	}
	return cfg
}

func getConfiguration(ctx context.Context, c client.Reader, kind WebhookKind, name string) (configuration, error) {
	switch kind {
	case Validating:
		o := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, o); err != nil {
			return configuration{}, err
		}
		return validatingConfiguration(o), nil
	case Mutating:
		o := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, o); err != nil {
			return configuration{}, err
		}
		return mutatingConfiguration(o), nil
	}
	return configuration{}, fmt.Errorf("unknown webhook configuration kind %q", kind)
}

// FindWebhooks maps the cluster's admission webhooks to the controllers that
// serve them: a webhook's clientConfig.service names a Service, and the
// Service's selector matches the pod template of a Deployment in its namespace.
func FindWebhooks(ctx context.Context, c client.Reader, controllers []Controller) (*Webhooks, error) {
	podLabels := map[string][]labels.Set{} // namespace -> pod template labels of its controllers
	for _, ctrl := range controllers {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, ctrl.Key, d); err != nil {
			return nil, fmt.Errorf("getting controller Deployment %s: %w", ctrl.Key, err)
		}
		podLabels[d.Namespace] = append(podLabels[d.Namespace], labels.Set(d.Spec.Template.Labels))
	}
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return nil, err
	}
	services := map[types.NamespacedName]*corev1.Service{}
	result := &Webhooks{}
	for _, cfg := range configs {
		for _, e := range cfg.entries {
			ref := WebhookRef{Kind: cfg.kind, Configuration: cfg.object.GetName(), Webhook: e.name}
			svcRef := e.clientConfig.Service
			if svcRef == nil {
				result.ByURL = append(result.ByURL, ref)
				continue
			}
			key := types.NamespacedName{Namespace: svcRef.Namespace, Name: svcRef.Name}
			svc, seen := services[key]
			if !seen {
				svc = &corev1.Service{}
				if err := c.Get(ctx, key, svc); err != nil {
					if !apierrors.IsNotFound(err) {
						return nil, fmt.Errorf("getting Service %s of %s: %w", key, ref, err)
					}
					svc = nil // a webhook pointing nowhere is nobody's
				}
				services[key] = svc
			}
			if svc != nil && servesAny(svc, podLabels[svc.Namespace]) {
				result.Served = append(result.Served, ref)
			}
		}
	}
	sortRefs(result.Served)
	sortRefs(result.ByURL)
	return result, nil
}

func servesAny(svc *corev1.Service, pods []labels.Set) bool {
	if len(svc.Spec.Selector) == 0 {
		return false // a Service without selector has hand-made endpoints: not a Deployment's
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for _, p := range pods {
		if sel.Matches(p) {
			return true
		}
	}
	return false
}

func sortRefs(refs []WebhookRef) {
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
}

// InstallBypass adds to each given webhook's objectSelector the requirement
// that objects do not carry the operation label, so the objects in flight are
// admitted while the webhooks' servers are down, and every other write still
// meets the webhooks. Each configuration's original selectors are saved in
// the same update, and never overwritten once saved.
func InstallBypass(ctx context.Context, c client.Client, refs []WebhookRef) error {
	for _, group := range groupByConfiguration(refs) {
		cfg, err := getConfiguration(ctx, c, group.kind, group.name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue // removed meanwhile: nothing to bypass
			}
			return fmt.Errorf("getting %s %s: %w", group.kind, group.name, err)
		}
		saved, err := savedSelectors(cfg.object)
		if err != nil {
			return err
		}
		if saved == nil {
			saved = map[string]*metav1.LabelSelector{}
		}
		changed := false
		for _, e := range cfg.entries {
			if !group.webhooks[e.name] {
				continue
			}
			if _, ok := saved[e.name]; !ok {
				// Save before changing: what is saved is always the selector
				// the webhook had before this operator touched it.
				saved[e.name] = (*e.objectSelector).DeepCopy()
				changed = true
			}
			if !HasBypass(*e.objectSelector) {
				*e.objectSelector = WithBypass(*e.objectSelector)
				changed = true
			}
		}
		if !changed {
			continue
		}
		if err := setSavedSelectors(cfg.object, saved); err != nil {
			return err
		}
		if err := c.Update(ctx, cfg.object); err != nil {
			return fmt.Errorf("installing the webhook bypass on %s %s: %w", group.kind, group.name, err)
		}
	}
	return nil
}

// RemoveBypass puts back the saved objectSelector of every webhook in every
// configuration that holds saved selectors, and drops the saved copy. Only
// the selectors are restored: any other change made meanwhile (a rotated
// caBundle, say) is kept.
func RemoveBypass(ctx context.Context, c client.Client) error {
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return err
	}
	for _, cfg := range configs {
		saved, err := savedSelectors(cfg.object)
		if err != nil {
			return err
		}
		if saved == nil {
			continue
		}
		for _, e := range cfg.entries {
			if sel, ok := saved[e.name]; ok {
				*e.objectSelector = sel
			}
		}
		annotations := cfg.object.GetAnnotations()
		delete(annotations, movev1alpha1.OriginalObjectSelectorsAnnotation)
		cfg.object.SetAnnotations(annotations)
		if err := c.Update(ctx, cfg.object); err != nil {
			return fmt.Errorf("removing the webhook bypass from %s %s: %w", cfg.kind, cfg.object.GetName(), err)
		}
	}
	return nil
}

// BypassInstalled lists the configurations that still hold saved selectors,
// that is, where the bypass is (or may be) in place.
func BypassInstalled(ctx context.Context, c client.Reader) ([]string, error) {
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, cfg := range configs {
		if _, ok := cfg.object.GetAnnotations()[movev1alpha1.OriginalObjectSelectorsAnnotation]; ok {
			out = append(out, fmt.Sprintf("%s %s", cfg.kind, cfg.object.GetName()))
		}
	}
	return out, nil
}

type configurationGroup struct {
	kind     WebhookKind
	name     string
	webhooks map[string]bool
}

func groupByConfiguration(refs []WebhookRef) []configurationGroup {
	index := map[[2]string]int{}
	var out []configurationGroup
	for _, r := range refs {
		k := [2]string{string(r.Kind), r.Configuration}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, configurationGroup{kind: r.Kind, name: r.Configuration, webhooks: map[string]bool{}})
		}
		out[i].webhooks[r.Webhook] = true
	}
	return out
}

func savedSelectors(o client.Object) (map[string]*metav1.LabelSelector, error) {
	raw, ok := o.GetAnnotations()[movev1alpha1.OriginalObjectSelectorsAnnotation]
	if !ok {
		return nil, nil
	}
	saved := map[string]*metav1.LabelSelector{}
	if err := json.Unmarshal([]byte(raw), &saved); err != nil {
		return nil, fmt.Errorf("annotation %s on %s is not the JSON this operator writes (%w); restore the webhooks' objectSelectors by hand and remove it",
			movev1alpha1.OriginalObjectSelectorsAnnotation, o.GetName(), err)
	}
	return saved, nil
}

func setSavedSelectors(o client.Object, saved map[string]*metav1.LabelSelector) error {
	raw, err := json.Marshal(saved)
	if err != nil {
		return fmt.Errorf("encoding the original objectSelectors of %s: %w", o.GetName(), err)
	}
	annotations := o.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[movev1alpha1.OriginalObjectSelectorsAnnotation] = string(raw)
	o.SetAnnotations(annotations)
	return nil
}
