package access

import (
	"context"
	"fmt"
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
func Check(ctx context.Context, clients map[movev1alpha1.ClusterRole]client.Client, needs []Need, concurrency int) ([]Need, error) {
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
		c, ok := clients[n.Cluster]
		if !ok || c == nil {
			continue
		}
		g.Go(func() error {
			allowed, err := review(ctx, c, n)
			if err != nil {
				return fmt.Errorf("%s cluster: asking whether the operator may %s %s: %w",
					strings.ToLower(string(n.Cluster)), n.Verb, groupResource(n.Group, n.Resource), err)
			}
			if !allowed {
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

func review(ctx context.Context, c client.Client, n Need) (bool, error) {
	resource, subresource, _ := strings.Cut(n.Resource, "/")
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: n.Namespace, Verb: n.Verb, Group: n.Group, Resource: resource, Subresource: subresource,
		},
	}}
	if err := c.Create(ctx, r); err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
