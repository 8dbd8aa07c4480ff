package controllers

import (
	"context"
	"fmt"
	"time"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/quiesce"
)

var restoringTargetPhase = phaseSpec{
	phase:     movev1alpha1.PhaseRestoringTarget,
	condition: movev1alpha1.TargetRestoredCondition,
	steps:     restoringTargetSteps,
}

// restoringTargetSteps bring the target's controllers back, then remove
// the bypass, check the moved objects with the target's webhooks
// (spec.targetValidation) and unpause what moved. When that takes longer
// than spec.timeouts.scaleUp (the target is away, or its controllers do
// not become Available), the source's controllers come back meanwhile: the
// source holds only what stays there, and what stays (other Clusters,
// among them) must not go unmanaged for as long as the target is away.
//
// The source's providers start as soon as the target's are scaled up
// (startSourceProviders), so that the two clusters' pods start together:
// while the target's restore waits for them to be Available.
var restoringTargetSteps = []subStep{
	// The webhooks of a provider its user keeps at zero let the operator
	// through until the last step: its identity now, if it changed.
	{name: "restore the target", preamble: bothBypasses, do: (*MoveOperationReconciler).restoreTarget},
	{name: "start the source's providers", once: true, runs: unlessError, do: (*MoveOperationReconciler).startSourceProviders},
	{name: "restart the source past the timeout", runs: ifUnfinished, do: (*MoveOperationReconciler).restartSourcePastTimeout},
}

// targetScaledUp is recorded in the move's memo (see memo.finished) once
// RestoringTarget has scaled the target's controllers back (see
// restartControllers), which lets the source's providers start.
const targetScaledUp = "the target's controllers scaled up"

func (r *MoveOperationReconciler) restoreTarget(ctx context.Context, s *scope) (outcome, error) {
	return r.restore(ctx, s, s.target.Client, movev1alpha1.ClusterTarget, true, nil)
}

// restartSourcePastTimeout scales the source's controllers back once the
// target's restore has lasted longer than spec.timeouts.scaleUp.
func (r *MoveOperationReconciler) restartSourcePastTimeout(ctx context.Context, s *scope) (outcome, error) {
	if time.Since(s.phaseStarted()) <= s.mo.Spec.Timeouts.ScaleUpTimeout() {
		return done(), nil
	}
	return done(), r.restartSourceControllers(ctx, s)
}

// startSourceProviders scales the source's providers back to their
// recorded replicas once the target's have been scaled up, without waiting
// for either: a provider's pod takes seconds to start on a real node (its
// manager syncs its caches, starts its webhook server, and the kubelet's
// readiness probe sees it), and waiting for the target's to be Available
// before even starting the source's kept every provider of the source down
// for both starts, one after the other. It is safe past Deleting: the
// source holds only what stays there, which the target does not manage, and
// the source's webhooks, served again, still let the operator through (its
// bypass goes in RestoringSource). The managers (cluster-api-operator)
// stay stopped until RestoringSource starts them after their providers, and
// the scale-ups go target first, as before. RestoringSource then waits for
// the source's providers, which have been starting meanwhile.
func (r *MoveOperationReconciler) startSourceProviders(ctx context.Context, s *scope) (outcome, error) {
	if !r.memoOf(s.mo.UID).hasFinished(movev1alpha1.PhaseRestoringTarget, targetScaledUp) {
		return waitFor(r.PollInterval, "waiting for the target's controllers to be scaled up"), nil
	}
	look, err := oneLook(s, r.Source)
	if err != nil {
		return outcome{}, err
	}
	controllers, err := r.controllersToRestore(ctx, s, look, movev1alpha1.ClusterSource)
	if err != nil {
		return outcome{}, err
	}
	providers, _ := quiesce.SplitManagers(controllers)
	if _, err := quiesce.Restore(ctx, look, providers, s.mo.Spec.Controllers.FallbackReplicasOrDefault()); err != nil {
		return outcome{}, fmt.Errorf("source cluster: starting the providers: %w", err)
	}
	return done(), nil
}
