package targetaccess

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// DefaultDuration is how long a token is valid when Options.Duration is
	// zero: longer than a move takes with the default timeouts of
	// spec.timeouts (five to ten minutes per bounded wait), with room for a
	// move that is created some hours after the token.
	DefaultDuration = 24 * time.Hour
	// MinDuration is the shortest token the TokenRequest API issues.
	MinDuration = 10 * time.Minute
	// DefaultWaitTimeout bounds Grant's waits (the aggregated ClusterRole
	// receiving its rules, the token being authorized) when
	// Options.WaitTimeout is zero. Both take a second or so on a
	// healthy cluster.
	DefaultWaitTimeout = time.Minute
	// FieldManager is the server-side apply field manager of what Grant
	// applies to the target.
	FieldManager = "move-operator-target-access"
)

// Options tune Grant.
type Options struct {
	// ServiceAccount to mint a token for. Default: the manifest's only
	// ServiceAccount (move-operator-target in dist/target-access.yaml).
	ServiceAccount string
	// Namespace of the ServiceAccount. Default: the namespace of the
	// manifest's ServiceAccount (move-operator-system).
	Namespace string
	// Duration the token is valid for. Default: DefaultDuration; at least
	// MinDuration. The API server may issue a shorter one
	// (--service-account-max-token-expiration): Grant returns when the
	// token it got expires.
	Duration time.Duration
	// Server is the target API server's URL as the source cluster reaches
	// it, written in the kubeconfig. Default: the host of the target's REST
	// config.
	Server string
	// WaitTimeout bounds each of Grant's waits. Default: DefaultWaitTimeout.
	WaitTimeout time.Duration
}

// withDefaults fills the options left empty, from the manifest where it
// names them, and refuses what the TokenRequest API would refuse.
func (o Options) withDefaults(m *Manifest) (Options, error) {
	if o.ServiceAccount == "" {
		if m.ServiceAccount.Name == "" {
			return o, errors.New("the manifest does not hold exactly one ServiceAccount: name the one to mint a token for")
		}
		o.ServiceAccount = m.ServiceAccount.Name
	}
	if o.Namespace == "" {
		if m.ServiceAccount.Namespace == "" || m.ServiceAccount.Name != o.ServiceAccount {
			return o, fmt.Errorf("the namespace of ServiceAccount %s is not in the manifest: name it", o.ServiceAccount)
		}
		o.Namespace = m.ServiceAccount.Namespace
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Duration < MinDuration {
		return o, fmt.Errorf("a token valid for %s is shorter than the TokenRequest API issues (at least %s)", o.Duration, MinDuration)
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	return o, nil
}

// Username is the name the API server knows a ServiceAccount by: what a
// SelfSubjectReview with its token reports, and what the operator's webhook
// bypass is scoped to in the target.
func Username(sa types.NamespacedName) string {
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// Grant gives the operator its access to a target cluster: it applies the
// manifest's objects to the target with server-side apply (idempotent: a
// second Grant changes nothing and mints another token), waits until every
// aggregated ClusterRole bound to the ServiceAccount holds the rules of its
// base roles (the clusterrole-aggregation controller fills them), requests a
// token for the ServiceAccount (TokenRequest, opts.Duration), waits until
// the API server authorizes that token for every rule, and returns a
// self-contained kubeconfig (server, CA data, token) and when the token
// expires.
//
// target must be allowed to create what the manifest holds: ClusterRoles
// and their binding need either the rights they grant or the escalate and
// bind verbs (a cluster administrator has both).
func Grant(ctx context.Context, target *rest.Config, manifest []byte, opts Options) (kubeconfig []byte, expires time.Time, err error) {
	m, err := ParseManifest(manifest)
	if err != nil {
		return nil, time.Time{}, err
	}
	opts, err = opts.withDefaults(m)
	if err != nil {
		return nil, time.Time{}, err
	}
	sa := types.NamespacedName{Namespace: opts.Namespace, Name: opts.ServiceAccount}
	endpoint, err := EndpointOf(target, opts.Server)
	if err != nil {
		return nil, time.Time{}, err
	}
	c, err := newClient(target)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("connecting to the target: %w", err)
	}

	if err := apply(ctx, c, m); err != nil {
		return nil, time.Time{}, err
	}
	aggregated, err := m.AggregatedRolesOf(sa)
	if err != nil {
		return nil, time.Time{}, err
	}
	var rules []rbacv1.PolicyRule
	for _, a := range aggregated {
		if err := waitForRules(ctx, c, a, opts.WaitTimeout); err != nil {
			return nil, time.Time{}, err
		}
		rules = append(rules, a.Rules...)
	}
	token, expires, err := requestToken(ctx, c, sa, opts.Duration)
	if err != nil {
		return nil, time.Time{}, err
	}
	if err := waitAuthorized(ctx, target, token, sa, rules, opts.WaitTimeout); err != nil {
		return nil, time.Time{}, err
	}
	kubeconfig, err = Kubeconfig(endpoint, sa.Name, token)
	if err != nil {
		return nil, time.Time{}, err
	}
	return kubeconfig, expires, nil
}

// WaitForAggregation waits until every aggregated ClusterRole of the
// manifest (dist/install.yaml, dist/target-access.yaml) holds the rules of
// the manifest's ClusterRoles it selects, in the cluster of cfg. Whoever
// applies a manifest with aggregated roles by other means than Grant (a
// test applying dist/install.yaml to a source) waits with it before using
// the identity bound to them: the clusterrole-aggregation controller fills
// their rules a moment after they are written.
func WaitForAggregation(ctx context.Context, cfg *rest.Config, manifest []byte, timeout time.Duration) error {
	m, err := ParseManifest(manifest)
	if err != nil {
		return err
	}
	aggregated, err := m.AggregatedRoles()
	if err != nil {
		return err
	}
	c, err := newClient(cfg)
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	for _, a := range aggregated {
		if err := waitForRules(ctx, c, a, timeout); err != nil {
			return err
		}
	}
	return nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// apply writes every object of the manifest with server-side apply, forcing
// its field manager's ownership: the manifest is the truth for the fields it
// sets, and what others set (the rules the aggregation controller fills in)
// is left alone.
func apply(ctx context.Context, c client.Client, m *Manifest) error {
	for _, obj := range m.Objects {
		u := obj.DeepCopy()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			what := describe(obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if apierrors.IsForbidden(err) {
				return fmt.Errorf("applying %s to the target: %w; use a kubeconfig of the target's cluster administrator (creating a ClusterRole and its binding takes the rights they grant, or the escalate and bind verbs)", what, err)
			}
			return fmt.Errorf("applying %s to the target: %w", what, err)
		}
	}
	return nil
}

// waitForRules waits until the aggregated ClusterRole holds every rule it
// aggregates from the manifest. Until then a token would be refused what
// the move needs, and a move started at once would fail its preflight.
func waitForRules(ctx context.Context, c client.Client, a Aggregated, timeout time.Duration) error {
	var missing []rbacv1.PolicyRule
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		role := &rbacv1.ClusterRole{}
		if err := c.Get(ctx, client.ObjectKey{Name: a.Name}, role); err != nil {
			return false, fmt.Errorf("reading ClusterRole %s: %w", a.Name, err)
		}
		missing = missingRules(a.Rules, role.Rules)
		return len(missing) == 0, nil
	})
	if err != nil && len(missing) > 0 {
		return fmt.Errorf("ClusterRole %s lacks %d of the rules it aggregates (the first: %s) after %s: is the clusterrole-aggregation controller of kube-controller-manager running? (%w)",
			a.Name, len(missing), describeRule(missing[0]), timeout, err)
	}
	return err
}

// missingRules returns the rules of want that have holds no equal of.
func missingRules(want, have []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, w := range want {
		found := false
		for _, h := range have {
			if equality.Semantic.DeepEqual(w, h) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// requestToken mints a token for the ServiceAccount, bound to nothing but
// its expiry: the ServiceAccount's, not a pod's or a Secret's, so that it
// lives as long as asked.
func requestToken(ctx context.Context, c client.Client, sa types.NamespacedName, d time.Duration) (string, time.Time, error) {
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(d / time.Second))}}
	if err := c.SubResource("token").Create(ctx, account, req); err != nil {
		return "", time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s in the target: %w", sa, err)
	}
	if req.Status.Token == "" {
		return "", time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s in the target: the API server returned none", sa)
	}
	return req.Status.Token, req.Status.ExpirationTimestamp.Time, nil
}

// waitAuthorized waits until the API server authorizes the token for one
// verb of each rule (a SelfSubjectAccessReview made with the token): its
// authorizer learns of the aggregated rules through a watch, a moment after
// they are written, and a kubeconfig handed out before would be refused.
func waitAuthorized(ctx context.Context, target *rest.Config, token string, sa types.NamespacedName, rules []rbacv1.PolicyRule, timeout time.Duration) error {
	cfg := rest.AnonymousClientConfig(target)
	cfg.BearerToken = token
	c, err := newClient(cfg)
	if err != nil {
		return fmt.Errorf("connecting to the target with the new token: %w", err)
	}
	who := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, who); err != nil {
		return fmt.Errorf("asking the target who the new token is (SelfSubjectReview): %w", err)
	}
	if got, want := who.Status.UserInfo.Username, Username(sa); got != want {
		return fmt.Errorf("the target knows the new token as %q, not %q", got, want)
	}
	var denied []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		denied = denied[:0]
		for _, r := range rules {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: accessOf(r)}
			if err := c.Create(ctx, review); err != nil {
				return false, fmt.Errorf("asking the target what the new token may do (SelfSubjectAccessReview): %w", err)
			}
			if !review.Status.Allowed {
				denied = append(denied, describeRule(r))
			}
		}
		return len(denied) == 0, nil
	})
	if err != nil && len(denied) > 0 {
		return fmt.Errorf("the target does not authorize %s for %s after %s (%w)", Username(sa), strings.Join(denied, "; "), timeout, err)
	}
	return err
}

// accessOf is a request that the rule allows: its first verb on its first
// resource of its first group (or its first non-resource URL).
func accessOf(r rbacv1.PolicyRule) authorizationv1.SelfSubjectAccessReviewSpec {
	verb := first(r.Verbs)
	if len(r.NonResourceURLs) > 0 {
		return authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: verb}}
	}
	resource, subresource, _ := strings.Cut(first(r.Resources), "/")
	return authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Verb: verb, Group: first(r.APIGroups), Resource: resource, Subresource: subresource, Name: first(r.ResourceNames),
	}}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// describeRule names a rule for a message: verbs on resources of groups.
func describeRule(r rbacv1.PolicyRule) string {
	if len(r.NonResourceURLs) > 0 {
		return fmt.Sprintf("%s %s", strings.Join(r.Verbs, ","), strings.Join(r.NonResourceURLs, ","))
	}
	groups := make([]string, 0, len(r.APIGroups))
	for _, g := range r.APIGroups {
		if g == "" {
			g = "core"
		}
		groups = append(groups, g)
	}
	return fmt.Sprintf("%s %s in %s", strings.Join(r.Verbs, ","), strings.Join(r.Resources, ","), strings.Join(groups, ","))
}

func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
