package controllers

import (
	"context"
	"fmt"
	"time"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
)

var scalingDownPhase = phaseSpec{
	phase:     movev1alpha1.PhaseScalingDown,
	condition: movev1alpha1.ControllersScaledDownCondition,
	// A move resumed by an operator that runs as another identity, or
	// with a target credential of another identity, moves the bypass
	// there first.
	preamble: bothBypasses,
	steps:    scaleDownSteps,
	// The wait for block-move and the one for the pods to go, together.
	errorBound: &errorBound{
		timeouts: "spec.timeouts.blockMove + spec.timeouts.scaleDown", reason: movev1alpha1.ReasonScaleDownTimeout, stuck: "still failed after",
		bound: func(spec movev1alpha1.MoveOperationSpec) time.Duration {
			return spec.Timeouts.BlockMoveTimeout() + spec.Timeouts.ScaleDownTimeout()
		},
		since: sincePhaseStarted,
	},
}

// scaleDownSteps install the webhook bypass, pause what moves, wait for
// block-move to clear and stop every controller in both clusters, until
// the last controller pod is gone. The first three are done once per
// operator run (a restarted operator repeats them: the bypass and the
// pause find their work done); the last looks at the pods on every
// reconcile.
var scaleDownSteps = []subStep{
	// First of all, before any write to a Cluster API object: a provider
	// that is down already (scaled to zero before the move) refuses the
	// pause otherwise, and would strand the move here.
	{name: "bypass", once: true, do: (*MoveOperationReconciler).bypassStep},
	{name: "pause", once: true, do: (*MoveOperationReconciler).pauseStep},
	{name: "block-move", once: true, do: (*MoveOperationReconciler).unblockedStep},
	{name: "stop", do: (*MoveOperationReconciler).stopStep},
}

func (r *MoveOperationReconciler) bypassStep(ctx context.Context, s *scope) (outcome, error) {
	return done(), r.installBypass(ctx, s, s.target)
}

func (r *MoveOperationReconciler) pauseStep(ctx context.Context, s *scope) (outcome, error) {
	plan, err := r.buildPlan(ctx, s.mo)
	if err != nil {
		return outcome{}, err
	}
	if err := move.Pause(ctx, r.Source, plan, string(s.mo.UID), r.Move); err != nil {
		return outcome{}, err
	}
	r.memoOf(s.mo.UID).pausePlan = plan
	return done(), nil
}

// unblockedStep waits until no paused object carries block-move: its
// provider is finishing work that must not be interrupted.
func (r *MoveOperationReconciler) unblockedStep(ctx context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	blockers, err := move.Blockers(ctx, r.Source, mem.pausePlan)
	if err != nil {
		return outcome{}, err
	}
	if len(blockers) > 0 {
		timeout := s.mo.Spec.Timeouts.BlockMoveTimeout()
		msg := fmt.Sprintf("%s carry the %s annotation: their providers are finishing work that must not be interrupted", joinRefs(blockers), graph.BlockMoveAnnotation)
		if time.Since(s.phaseStarted()) > timeout {
			return failWith(movev1alpha1.ReasonBlockMoveTimeout, fmt.Sprintf("%s, still after %s (spec.timeouts.blockMove)", msg, timeout)), nil
		}
		return r.poll(s, "block-move", msg), nil
	}
	// The plan has served: Copying records its own, and a fleet's plan
	// held for the rest of the move would add to the copy's memory.
	mem.pausePlan = nil
	return done(), nil
}

// stopStep scales every controller to zero, the managers first
// (cluster-api-operator, spec.controllers.additional), and waits until
// their pods are gone.
func (r *MoveOperationReconciler) stopStep(ctx context.Context, s *scope) (outcome, error) {
	remaining, err := r.stopControllers(ctx, s, s.target)
	if err != nil {
		return outcome{}, err
	}
	if len(remaining) > 0 {
		timeout := s.mo.Spec.Timeouts.ScaleDownTimeout()
		msg := fmt.Sprintf("controller pods still running: %s", formatCounts(remaining))
		if time.Since(s.phaseStarted()) > timeout {
			return failWith(movev1alpha1.ReasonScaleDownTimeout, fmt.Sprintf("%s after %s (spec.timeouts.scaleDown)", msg, timeout)), nil
		}
		return r.poll(s, "stop", msg), nil
	}
	return done(), nil
}
