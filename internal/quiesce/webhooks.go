package quiesce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
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
	name            string
	clientConfig    *admissionregistrationv1.WebhookClientConfig
	objectSelector  **metav1.LabelSelector
	matchConditions *[]admissionregistrationv1.MatchCondition
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
		cfg.entries = append(cfg.entries, webhookEntry{name: w.Name, clientConfig: &w.ClientConfig, objectSelector: &w.ObjectSelector, matchConditions: &w.MatchConditions})
	}
	return cfg
}

func mutatingConfiguration(o *admissionregistrationv1.MutatingWebhookConfiguration) configuration {
	cfg := configuration{kind: Mutating, object: o}
	for i := range o.Webhooks {
		w := &o.Webhooks[i]
		cfg.entries = append(cfg.entries, webhookEntry{name: w.Name, clientConfig: &w.ClientConfig, objectSelector: &w.ObjectSelector, matchConditions: &w.MatchConditions})
	}
	return cfg
}

// updateConfiguration reads the webhook configuration kind/name, lets
// change alter it, and writes it when change reports that it did; on a
// conflict it reads and changes it again, so a change never overwrites
// someone else's (a caBundle rotated meanwhile). It reports whether it
// wrote. A configuration removed meanwhile has nothing left to change: not
// an error, nothing written.
func updateConfiguration(ctx context.Context, c client.Client, kind WebhookKind, name string,
	change func(configuration) (bool, error)) (bool, error) {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cfg, err := getConfiguration(ctx, c, kind, name)
		if err != nil {
			return err
		}
		changed, err := change(cfg)
		if err != nil || !changed {
			return err
		}
		if err := c.Update(ctx, cfg.object); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return wrote, err
}

// updateListed is updateConfiguration begun from the configuration as it
// was listed rather than read again: the update names the listed
// resourceVersion, so the API server takes it only when nobody wrote the
// configuration since the list; on a conflict it is read and changed
// again as updateConfiguration does. The list is what the server held an
// instant ago, as a read would be: one request less per configuration.
func updateListed(ctx context.Context, c client.Client, listed configuration,
	change func(configuration) (bool, error)) (bool, error) {
	cfg, err := copyOf(listed)
	if err != nil {
		return false, err
	}
	changed, err := change(cfg)
	if err != nil || !changed {
		return false, err
	}
	err = c.Update(ctx, cfg.object)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		return updateConfiguration(ctx, c, listed.kind, listed.object.GetName(), change)
	}
	return false, err
}

// copyOf returns a configuration of its own, which change may alter
// without altering what was listed.
func copyOf(cfg configuration) (configuration, error) {
	switch o := cfg.object.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return validatingConfiguration(o.DeepCopy()), nil
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return mutatingConfiguration(o.DeepCopy()), nil
	}
	return configuration{}, fmt.Errorf("unknown webhook configuration %T", cfg.object)
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
			if len(podLabels[key.Namespace]) == 0 {
				// A Service selects pods of its own namespace only:
				// with no controller there, it serves none of them.
				continue
			}
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

// BypassConditionName names the match condition InstallBypass adds to a
// webhook. The condition is its own record: RemoveBypass finds and removes
// exactly the conditions of this name, whatever else changed meanwhile.
const BypassConditionName = "move.cluster.x-k8s.io/operator-bypass"

// maxMatchConditions is the API server's limit of match conditions per webhook.
const maxMatchConditions = 64

// BypassExpression is the CEL expression of the bypass for one identity: true
// (call the webhook) for every request but the operator's own. It reads only
// request.userInfo, so it never errors, not even on DELETE, where object is
// null.
func BypassExpression(username string) string {
	return bypassExpressionPrefix + strconv.Quote(username)
}

// bypassExpressionPrefix is what BypassExpression puts before the quoted
// username: the condition names the identity it lets through, and is the
// record of it (see BypassedUsernames).
const bypassExpressionPrefix = "request.userInfo.username != "

// InstallBypass adds to each given webhook a match condition that is false
// for requests of username, so the API server skips the webhook for the
// operator's own requests, and only those: a skipped webhook is never called,
// so its stopped server does not matter, and everyone else's writes still
// meet it (and are refused while it is down). Match conditions are ANDed, so
// the webhook sees exactly what it saw before, less the operator's requests.
// A webhook that already holds the condition for another username (a move
// made with another identity that did not restore) gets this one instead.
// It returns the configurations it wrote ("<kind> <name>"): none when every
// webhook held the bypass already.
func InstallBypass(ctx context.Context, c client.Client, refs []WebhookRef, username string) ([]string, error) {
	if username == "" {
		return nil, errors.New("installing the webhook bypass: the operator's username is unknown")
	}
	want := admissionregistrationv1.MatchCondition{Name: BypassConditionName, Expression: BypassExpression(username)}
	var written []string
	for _, group := range groupByConfiguration(refs) {
		wrote, err := updateConfiguration(ctx, c, group.kind, group.name, func(cfg configuration) (bool, error) {
			changed := false
			for _, e := range cfg.entries {
				if !group.webhooks[e.name] {
					continue
				}
				ok, err := withCondition(e.matchConditions, want)
				if err != nil {
					return false, fmt.Errorf("%s %s: webhook %s: %w", group.kind, group.name, e.name, err)
				}
				changed = changed || ok
			}
			return changed, nil
		})
		if err != nil {
			return written, fmt.Errorf("installing the webhook bypass on %s %s: %w", group.kind, group.name, err)
		}
		if wrote {
			written = append(written, fmt.Sprintf("%s %s", group.kind, group.name))
		}
	}
	return written, nil
}

// withCondition puts want among conds, replacing a condition of the same
// name, and reports whether conds changed.
func withCondition(conds *[]admissionregistrationv1.MatchCondition, want admissionregistrationv1.MatchCondition) (bool, error) {
	for i := range *conds {
		if (*conds)[i].Name == want.Name {
			if (*conds)[i].Expression == want.Expression {
				return false, nil
			}
			(*conds)[i].Expression = want.Expression
			return true, nil
		}
	}
	if len(*conds) >= maxMatchConditions {
		return false, fmt.Errorf("already holds %d match conditions, the most the API server allows, so the move cannot bypass it; remove one, or scale its provider down by hand and create the objects another way", len(*conds))
	}
	*conds = append(*conds, want)
	return true, nil
}

// RemoveBypass removes the bypass condition from every webhook of the
// cluster, and puts back the objectSelectors saved by earlier versions of the
// operator (which bypassed by label). Nothing else is touched: a caBundle
// rotated meanwhile, others' match conditions and selectors stay as they are.
func RemoveBypass(ctx context.Context, c client.Client) error {
	return removeBypass(ctx, c, nil)
}

// RemoveBypassFrom removes the bypass condition from the given webhooks only:
// those whose servers are running again, while the webhooks of providers
// that stay stopped keep letting the operator through.
func RemoveBypassFrom(ctx context.Context, c client.Client, refs []WebhookRef) error {
	if len(refs) == 0 {
		return nil
	}
	return removeBypass(ctx, c, refs)
}

// removeBypass removes the bypass from refs, or from everything when refs is nil.
func removeBypass(ctx context.Context, c client.Client, refs []WebhookRef) error {
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return err
	}
	only := map[WebhookRef]bool{}
	for _, r := range refs {
		only[r] = true
	}
	for _, listed := range configs {
		if !holdsBypass(listed) {
			continue
		}
		_, err := updateListed(ctx, c, listed, func(cfg configuration) (bool, error) {
			changed := false
			if refs == nil {
				var err error
				if changed, err = restoreLegacySelectors(cfg); err != nil {
					return false, err
				}
			}
			for _, e := range cfg.entries {
				ref := WebhookRef{Kind: cfg.kind, Configuration: cfg.object.GetName(), Webhook: e.name}
				if refs != nil && !only[ref] {
					continue
				}
				if withoutCondition(e.matchConditions, BypassConditionName) {
					changed = true
				}
			}
			if dropRefreshMark(cfg) {
				changed = true
			}
			return changed, nil
		})
		if err != nil {
			return fmt.Errorf("removing the webhook bypass from %s %s: %w", listed.kind, listed.object.GetName(), err)
		}
	}
	return nil
}

func withoutCondition(conds *[]admissionregistrationv1.MatchCondition, name string) bool {
	kept := (*conds)[:0]
	removed := false
	for _, mc := range *conds {
		if mc.Name == name {
			removed = true
			continue
		}
		kept = append(kept, mc)
	}
	if len(kept) == 0 {
		kept = nil // as the webhook was written without conditions
	}
	*conds = kept
	return removed
}

// dropRefreshMark removes RefreshBypass's annotation from a configuration
// none of whose webhooks holds the bypass any longer, and reports whether
// it did.
func dropRefreshMark(cfg configuration) bool {
	annotations := cfg.object.GetAnnotations()
	if _, ok := annotations[movev1alpha1.BypassRefreshedAnnotation]; !ok {
		return false
	}
	for _, e := range cfg.entries {
		if holdsCondition(*e.matchConditions) {
			return false
		}
	}
	delete(annotations, movev1alpha1.BypassRefreshedAnnotation)
	cfg.object.SetAnnotations(annotations)
	return true
}

// holdsBypass reports whether a configuration holds a bypass of this
// operator: the condition, the selectors an earlier version saved, or the
// mark of a refresh.
func holdsBypass(cfg configuration) bool {
	annotations := cfg.object.GetAnnotations()
	if _, ok := annotations[movev1alpha1.OriginalObjectSelectorsAnnotation]; ok {
		return true
	}
	if _, ok := annotations[movev1alpha1.BypassRefreshedAnnotation]; ok {
		return true
	}
	for _, e := range cfg.entries {
		if holdsCondition(*e.matchConditions) {
			return true
		}
	}
	return false
}

// BypassInstalled lists the configurations that still hold a bypass.
func BypassInstalled(ctx context.Context, c client.Reader) ([]string, error) {
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, cfg := range configs {
		if holdsBypass(cfg) {
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

// restoreLegacySelectors puts back the objectSelectors that operator
// versions before the identity-scoped bypass saved in an annotation, so that
// a move begun by such a version and finished by this one leaves the
// webhooks as they were.
func restoreLegacySelectors(cfg configuration) (bool, error) {
	annotations := cfg.object.GetAnnotations()
	raw, ok := annotations[movev1alpha1.OriginalObjectSelectorsAnnotation]
	if !ok {
		return false, nil
	}
	saved := map[string]*metav1.LabelSelector{}
	if err := json.Unmarshal([]byte(raw), &saved); err != nil {
		return false, fmt.Errorf("annotation %s on %s is not the JSON this operator writes (%w); restore the webhooks' objectSelectors by hand and remove it",
			movev1alpha1.OriginalObjectSelectorsAnnotation, cfg.object.GetName(), err)
	}
	for _, e := range cfg.entries {
		if sel, ok := saved[e.name]; ok {
			*e.objectSelector = sel
		}
	}
	delete(annotations, movev1alpha1.OriginalObjectSelectorsAnnotation)
	cfg.object.SetAnnotations(annotations)
	return true, nil
}
