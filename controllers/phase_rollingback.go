package controllers

import (
	"context"
	"fmt"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/remote"
)

var rollingBackPhase = phaseSpec{
	phase:               movev1alpha1.PhaseRollingBack,
	condition:           movev1alpha1.RolledBackCondition,
	steps:               rollingBackSteps,
	stallsWithoutTarget: true,
}

// rollingBackSteps undo a move that failed before the point of no return.
// The source comes back first: it still holds every object as before the
// move, and its controllers must not wait for a target that may be away
// for long, or for good. Then what the move created in the target goes,
// and the target's controllers come back. The first two are done once per
// operator run (a restarted operator does them again: the source's restore
// finds it restored, the target's clearing finds nothing of the move's
// left); the last looks at the target on every reconcile.
var rollingBackSteps = []subStep{
	{name: sourceRestored, preamble: sourceBypass, once: true, do: (*MoveOperationReconciler).restoreSourceInRollback},
	// What the move created in the target is deleted through the webhooks
	// of its stopped controllers: the bypass must name the identity the
	// target's credential has now.
	{name: targetCleared, preamble: bothBypasses, once: true, do: (*MoveOperationReconciler).clearTarget},
	{name: "restore the target", preamble: bothBypasses, do: (*MoveOperationReconciler).restoreTargetInRollback},
}

// The names of the sub-steps controllersDown looks at.
const (
	sourceRestored = "restore the source"
	targetCleared  = "clear the target"
)

// targetDownWhileCleared: in a rollback, the target's controllers are at
// zero once the source is restored and until what the move created there
// is deleted (they come back after that); the source's are restored first.
func targetDownWhileCleared(mem *memo, role movev1alpha1.ClusterRole) bool {
	return role == movev1alpha1.ClusterTarget && mem.hasFinished(movev1alpha1.PhaseRollingBack, sourceRestored) &&
		!mem.hasFinished(movev1alpha1.PhaseRollingBack, targetCleared)
}

func (r *MoveOperationReconciler) restoreSourceInRollback(ctx context.Context, s *scope) (outcome, error) {
	if o, err := r.restore(ctx, s, r.Source, movev1alpha1.ClusterSource, true, nil); err != nil || !o.isDone() {
		return o, err
	}
	// Once the source holds again all it held, its GitOps managers may
	// apply it again: see gitops.go.
	return done(), r.resumeGitOps(ctx, s)
}

func (r *MoveOperationReconciler) restoreTargetInRollback(ctx context.Context, s *scope) (outcome, error) {
	return r.restore(ctx, s, s.target.Client, movev1alpha1.ClusterTarget, false, nil)
}

// clearTarget deletes what the move created in the target, children before
// owners, by the plan the move recorded (read back after a restart): a
// rollback deletes only this move's copies.
func (r *MoveOperationReconciler) clearTarget(ctx context.Context, s *scope) (outcome, error) {
	if err := r.clearTargetOf(ctx, s, s.target); err != nil {
		return outcome{}, fmt.Errorf("the source is restored; deleting what the move created in the target %s: %w", s.target.Server, err)
	}
	return done(), nil
}

func (r *MoveOperationReconciler) clearTargetOf(ctx context.Context, s *scope, target *remote.Target) error {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	if mem.copyPlan == nil {
		// None recorded means the move failed before it copied anything.
		recorded, found, err := planrecord.Load(ctx, r.Source, mo.Namespace, mo.UID)
		if err != nil {
			return fmt.Errorf("reading the record of the plan: %w", err)
		}
		if !found {
			recorded = graph.NewPlan(nil)
		}
		mem.copyPlan = recorded
	}
	targetTypes, err := graph.DiscoverTypes(ctx, target.Client)
	if err != nil {
		return err
	}
	copies, err := planrecord.LoadCopies(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return fmt.Errorf("reading the record of the copies: %w", err)
	}
	_, err = move.Rollback(ctx, target.Client, targetTypes, mem.copyPlan, string(mo.UID), copies, r.Move)
	return err
}
