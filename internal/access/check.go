package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// DefaultConcurrency is how many reviews Check asks of a cluster at once: a
// move's needs are a few hundred reviews, each answered from the API
// server's memory, so a few at a time finish in well under a second without
// crowding a loaded server.
const DefaultConcurrency = 8

// Check asks each cluster, with one SelfSubjectAccessReview per need, whether
// the client's identity may do it, and returns the needs refused, in the
// order of Compact. Needs of a cluster without a client are not checked.
//
// SelfSubjectAccessReview, not SelfSubjectRulesReview: a review is the
// authorizers' own answer, whatever they are (RBAC, a webhook, Node); a
// rules review is RBAC's rules only, namespaced, and says "incomplete" under
// any other authorizer, so its answer could not be trusted for a
// cluster-scoped kind nor on a managed cluster.
//
// The needs a group's wildcard covers (byGroup) are asked as one review
// first: the installer's roles grant Cluster API's groups whole, so a move's
// few hundred reviews become a few dozen.
func Check(ctx context.Context, clients map[movev1alpha1.ClusterRole]client.Client, needs []Need, concurrency int) ([]Need, error) {
	return checkByGroup(ctx, needs, concurrency, func(ctx context.Context, n Need) (bool, bool, error) {
		c, ok := clients[n.Cluster]
		if !ok || c == nil {
			return false, false, nil
		}
		allowed, err := review(ctx, c, n)
		if err != nil {
			return false, true, fmt.Errorf("%s cluster: asking whether the operator may %s %s: %w",
				strings.ToLower(string(n.Cluster)), n.Verb, groupResource(n.Group, n.Resource), err)
		}
		return allowed, true, nil
	})
}

// User is someone other than the caller, as a SubjectAccessReview names
// them: the creator of a MoveOperation.
type User struct {
	Name   string
	Groups []string
}

// CheckAs asks the cluster c, with one SubjectAccessReview per need,
// whether user may do it, and returns the needs refused, in the order of
// Compact. The cluster of each need is not looked at: c is the cluster
// asked. A namespaced need is first asked cluster-wide, once per verb and
// resource; only when that is refused is each namespace asked, so that a
// cluster administrator's check costs a few reviews however many
// namespaces a plan spans; before all that, one review asks whether the
// user may do everything (cluster-admin), which answers for every need.
func CheckAs(ctx context.Context, c client.Client, user User, needs []Need, concurrency int) ([]Need, error) {
	ask := func(ctx context.Context, n Need) (bool, bool, error) {
		allowed, err := reviewAs(ctx, c, user, n)
		if err != nil {
			return false, true, fmt.Errorf("asking whether %q may %s %s: %w", user.Name, n.Verb, groupResource(n.Group, n.Resource), err)
		}
		return allowed, true, nil
	}
	// A user granted every verb on every resource (cluster-admin) may do
	// whatever the needs are: one review answers for all of them.
	if all, _, err := ask(ctx, Need{Verb: "*", Group: "*", Resource: "*"}); err != nil || all {
		return nil, err
	}
	wide := map[Need]bool{}
	for _, n := range needs {
		if n.Namespace != "" && n.Name == "" {
			n.Namespace = ""
			wide[n] = true
		}
	}
	refusedWide, err := checkEach(ctx, keys(wide), concurrency, ask)
	if err != nil {
		return nil, err
	}
	var rest []Need
	for _, n := range needs {
		w := n
		w.Namespace = ""
		if n.Namespace != "" && n.Name == "" && !slices.Contains(refusedWide, w) {
			continue // granted in every namespace
		}
		rest = append(rest, n)
	}
	return checkEach(ctx, rest, concurrency, ask)
}

// minShared is how many needs a group's wildcard must cover to be asked:
// a refused wildcard costs one review more than asking each need.
const minShared = 2

// byGroup maps the wildcard of a group's resources to the needs it covers:
// needs of one cluster, verb, group and namespace, on the resources
// themselves ("*") or on one subresource of them ("*/status"), when at
// least minShared of them share it. The core group, the groups of the
// fixed needs (fixedGroups) and needs of one named object are left out:
// the installer's roles never grant them whole, so their wildcard would be
// refused, a review more than asking each need. Leaving a wildcard out asks
// no less: its needs are asked one by one.
func byGroup(needs []Need) map[Need][]Need {
	out := map[Need][]Need{}
	for _, n := range Compact(needs) {
		if n.Group == "" || n.Name != "" || fixedGroups[n.Group] {
			continue
		}
		w := n
		w.Resource = "*"
		if _, sub, ok := strings.Cut(n.Resource, "/"); ok {
			w.Resource = "*/" + sub
		}
		out[w] = append(out[w], n)
	}
	for w, covered := range out {
		if len(covered) < minShared {
			delete(out, w)
		}
	}
	return out
}

// checkByGroup asks about the wildcards of byGroup first, then about each
// need no allowed wildcard covers. An authorizer that allows a verb on
// every resource of a group ("*") has answered for each of them: the check
// asks no less than one review per need would.
func checkByGroup(ctx context.Context, needs []Need, concurrency int, ask func(context.Context, Need) (allowed, asked bool, err error)) ([]Need, error) {
	wildcards := byGroup(needs)
	refused, err := checkEach(ctx, keys(wildcards), concurrency, ask)
	if err != nil {
		return nil, err
	}
	covered := map[Need]bool{}
	for w, ns := range wildcards {
		if slices.Contains(refused, w) {
			continue
		}
		for _, n := range ns {
			covered[n] = true
		}
	}
	rest := slices.DeleteFunc(Compact(needs), func(n Need) bool { return covered[n] })
	return checkEach(ctx, rest, concurrency, ask)
}

func keys[V any](m map[Need]V) []Need {
	out := make([]Need, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	return out
}

// checkEach asks ask about every need of Compact(needs), a few at a time,
// and returns those refused; ask says whether it could ask at all (a
// cluster without a client is not asked).
func checkEach(ctx context.Context, needs []Need, concurrency int, ask func(context.Context, Need) (allowed, asked bool, err error)) ([]Need, error) {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	var (
		mu      sync.Mutex
		missing []Need
	)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, n := range Compact(needs) {
		g.Go(func() error {
			allowed, asked, err := ask(ctx, n)
			if err != nil {
				return err
			}
			if asked && !allowed {
				mu.Lock()
				missing = append(missing, n)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return Compact(missing), nil
}

func attributes(n Need) *authorizationv1.ResourceAttributes {
	resource, subresource, _ := strings.Cut(n.Resource, "/")
	return &authorizationv1.ResourceAttributes{
		Namespace: n.Namespace, Verb: n.Verb, Group: n.Group, Resource: resource, Subresource: subresource, Name: n.Name,
	}
}

func review(ctx context.Context, c client.Client, n Need) (bool, error) {
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attributes(n)}}
	if err := c.Create(ctx, r); err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

func reviewAs(ctx context.Context, c client.Client, u User, n Need) (bool, error) {
	r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: u.Groups, ResourceAttributes: attributes(n),
	}}
	if err := c.Create(ctx, r); err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
