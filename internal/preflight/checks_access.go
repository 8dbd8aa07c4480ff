package preflight

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
)

// checkAccess asks each cluster whether the operator's identity may do
// everything the move does there (internal/access), once the kinds that
// move are known and before any check lists them: a missing rule is named
// with the rule that grants it, instead of a 403 retried for ever. It is a
// finding, not a wait: a human adds the rule and applies a new
// MoveOperation, as after any other failing check. A target not reachable
// yet is not asked; its own finding says why.
func checkAccess(ctx context.Context, e *Env) error {
	if e.SourceTypes == nil {
		return nil
	}
	clients := map[movev1alpha1.ClusterRole]client.Client{movev1alpha1.ClusterSource: e.Source}
	if e.targetReady() {
		clients[movev1alpha1.ClusterTarget] = e.Target.Client
	}
	needs := access.Needs(access.Move{
		SourceKinds:    access.KindsOf(e.SourceTypes),
		TargetKinds:    access.KindsOf(e.TargetTypes),
		GitOps:         e.Spec.GitOps,
		Namespace:      e.Namespace,
		ClaimNamespace: e.ClaimNamespace,
	})
	missing, err := access.Check(ctx, clients, needs, access.DefaultConcurrency)
	if err != nil {
		return fmt.Errorf("checking the operator's access: %w", err)
	}
	if len(missing) > 0 {
		e.find(movev1alpha1.ReasonAccessDenied, access.Message(missing))
		e.accessDenied = true
	}
	return nil
}
