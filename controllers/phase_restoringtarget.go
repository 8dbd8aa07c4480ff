package controllers

import (
	"context"
	"fmt"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/quiesce"
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
//
// The source's providers start as soon as the target's are scaled up
// (startSourceProviders), so that the two clusters' pods start together.
func (r *MoveOperationReconciler) reconcileRestoringTarget(ctx context.Context, s *scope) (outcome, error) {
	o, err := r.restoreTarget(ctx, s)
	if err == nil {
		err = r.startSourceProviders(ctx, s)
	}
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
func (r *MoveOperationReconciler) startSourceProviders(ctx context.Context, s *scope) error {
	run := r.runFor(s.mo.UID)
	if !run.targetScaledUp || run.sourceStarted {
		return nil
	}
	controllers, err := r.controllersToRestore(ctx, s, r.Source, movev1alpha1.ClusterSource)
	if err != nil {
		return err
	}
	providers, _ := quiesce.SplitManagers(controllers)
	if _, err := quiesce.Restore(ctx, r.Source, providers, s.mo.Spec.Controllers.FallbackReplicasOrDefault()); err != nil {
		return fmt.Errorf("source cluster: starting the providers: %w", err)
	}
	run.sourceStarted = true
	return nil
}
