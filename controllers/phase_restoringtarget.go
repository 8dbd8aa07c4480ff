package controllers

import (
	"context"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

var restoringTargetPhase = phaseSpec{
	phase:     movev1alpha1.PhaseRestoringTarget,
	condition: movev1alpha1.TargetRestoredCondition,
	step:      (*MoveOperationReconciler).reconcileRestoringTarget,
	next:      movev1alpha1.PhaseRestoringSource,
	onDelete:  deletionFinishes,
}

// reconcileRestoringTarget brings the target's controllers back, then
// removes the bypass, checks the moved objects with the target's webhooks
// (spec.targetValidation) and unpauses what moved. When that takes
// longer than spec.timeouts.scaleUp (the target is away, or its controllers
// do not become Available), the source's controllers come back meanwhile:
// the source holds only what stays there, and what stays (other Clusters,
// among them) must not go unmanaged for as long as the target is away.
func (r *MoveOperationReconciler) reconcileRestoringTarget(ctx context.Context, s *scope) (outcome, error) {
	o, err := r.restoreTarget(ctx, s)
	if err == nil && o.isDone() {
		return o, nil
	}
	if time.Since(s.phaseStarted()) > s.mo.Spec.Timeouts.ScaleUpTimeout() {
		if serr := r.restartSourceControllers(ctx, s); serr != nil {
			err = kerrors.NewAggregate([]error{err, serr})
		}
	}
	return o, err
}

func (r *MoveOperationReconciler) restoreTarget(ctx context.Context, s *scope) (outcome, error) {
	target, o, err := r.target(ctx, s)
	if err != nil || !o.isDone() {
		return o, err
	}
	// The webhooks of a provider its user keeps at zero let the operator
	// through until the last step: its identity now, if it changed.
	if err := r.followIdentities(ctx, s, target); err != nil {
		return outcome{}, err
	}
	return r.restore(ctx, s, target.Client, movev1alpha1.ClusterTarget, true, nil)
}
