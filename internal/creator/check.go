package creator

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/graph"
)

// Ask asks the source whether user holds every one of needs, and returns
// the refusal to show (Refusal), empty when they do. planned is set for
// the plan's needs.
func Ask(ctx context.Context, source client.Client, user access.User, needs []access.Need, planned bool) (string, error) {
	missing, err := access.CheckAs(ctx, source, user, needs, access.DefaultConcurrency)
	if err != nil {
		return "", fmt.Errorf("checking the rights of the MoveOperation's creator: %w", err)
	}
	return Refusal(user, missing, planned), nil
}

// AskPlan asks whether user may read every object the plan takes to the
// target and delete every object it deletes from the source (PlanNeeds).
// It is asked whenever a plan is built, not only in Validating: the plan
// Copying records is the source as it is then, and may hold objects the
// plan Validating showed did not.
func AskPlan(ctx context.Context, source client.Client, user access.User, plan *graph.Plan) (string, error) {
	needs, err := PlanNeeds(plan, plan.Types())
	if err != nil {
		return "", err
	}
	return Ask(ctx, source, user, needs, true)
}
