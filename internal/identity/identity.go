// Package identity asks a cluster who a client is there: the operator's
// own username, to which the webhook bypass is scoped, and whether others
// may share it. It only asks; it never writes anything a cluster keeps.
package identity

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Identity is who a client is in one cluster, as that cluster's API server
// authenticates it: the username the bypass is scoped to.
type Identity struct {
	Username string
	Groups   []string
}

// WhoAmI asks the cluster who the client is (a SelfSubjectReview, which any
// authenticated user may make and which stores nothing).
func WhoAmI(ctx context.Context, c client.Client) (Identity, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return Identity{}, fmt.Errorf("asking the API server who the operator is (SelfSubjectReview): %w", err)
	}
	u := review.Status.UserInfo
	if u.Username == "" {
		return Identity{}, fmt.Errorf("the API server did not say who the operator is (SelfSubjectReview returned no username)")
	}
	return Identity{Username: u.Username, Groups: u.Groups}, nil
}

// Shared reports whether the identity may also be used by people or other
// programs: anything but a ServiceAccount. Every request made with it skips
// the stopped providers' webhooks while a move runs, so whoever else uses it
// can write objects those webhooks would have refused.
func (id Identity) Shared() bool {
	return !strings.HasPrefix(id.Username, "system:serviceaccount:")
}
