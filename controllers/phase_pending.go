package controllers

import (
	"context"
	"fmt"
	"time"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

var pendingPhase = phaseSpec{
	phase: movev1alpha1.PhasePending,
	steps: []subStep{{name: "claim the source", do: (*MoveOperationReconciler).reconcilePending}},
}

// reconcilePending starts the move once it holds the claim on the source
// cluster, so that one MoveOperation at a time moves it; a dry run never
// waits, since it writes nothing.
func (r *MoveOperationReconciler) reconcilePending(ctx context.Context, s *scope) (outcome, error) {
	mo := s.mo
	if len(mo.Status.PhaseTransitions) == 0 {
		s.enter(movev1alpha1.PhasePending)
	}
	if !mo.Spec.DryRun {
		// An atomic claim, not a look at the other MoveOperations: a cache
		// may not show yet that another one has just started.
		holder, err := r.acquireClaim(ctx, mo)
		if err != nil {
			return outcome{}, err
		}
		if holder.UID != mo.UID {
			return waitFor(5*time.Second, fmt.Sprintf("MoveOperation %s is moving this cluster; this one starts when it has ended", holder)), nil
		}
	}
	mo.Status.StartTime = ptrTime(time.Now())
	return done(), nil
}
