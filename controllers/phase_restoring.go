package controllers

import (
	"context"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/remote"
)

var restoringTargetPhase = phaseSpec{
	phase:     movev1alpha1.PhaseRestoringTarget,
	condition: movev1alpha1.TargetRestoredCondition,
	step:      (*MoveOperationReconciler).reconcileRestoringTarget,
	next:      movev1alpha1.PhaseRestoringSource,
	onDelete:  deletionFinishes,
}

var restoringSourcePhase = phaseSpec{
	phase:     movev1alpha1.PhaseRestoringSource,
	condition: movev1alpha1.SourceRestoredCondition,
	step:      (*MoveOperationReconciler).reconcileRestoringSource,
	next:      movev1alpha1.PhaseDone,
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
	if time.Since(s.phaseStarted()) > durationOr(s.mo.Spec.Timeouts.ScaleUp, 10*time.Minute) {
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
	return r.restore(ctx, s, target.Client, movev1alpha1.ClusterTarget, true, nil)
}

// reconcileRestoringSource brings the source's controllers back, and records
// on what stays in the source the copies made of it, so that a later move
// of those objects recognises them.
//
// The target is asked for only when the copies are recorded, after the
// source's controllers run again: they never wait for it.
func (r *MoveOperationReconciler) reconcileRestoringSource(ctx context.Context, s *scope) (outcome, error) {
	copiesIn := func(ctx context.Context) (*remote.Target, outcome, error) { return r.target(ctx, s) }
	return r.restore(ctx, s, r.Source, movev1alpha1.ClusterSource, true, copiesIn)
}
