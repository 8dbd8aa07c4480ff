package controllers

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

var restoringSourcePhase = phaseSpec{
	phase:     movev1alpha1.PhaseRestoringSource,
	condition: movev1alpha1.SourceRestoredCondition,
	preamble:  sourceBypass,
	steps:     []subStep{{name: "restore the source", do: (*MoveOperationReconciler).reconcileRestoringSource}},
}

// reconcileRestoringSource brings the source's controllers back, and notes
// on what stays in the source the copies made of it, so that a later move
// of those objects recognises them.
//
// The target is asked for only when the copies are noted, after the
// source's controllers run again: they never wait for it, and the rest of
// the source's restore waits for it no longer than spec.timeouts.scaleUp
// (see noteCopiesOfKept).
func (r *MoveOperationReconciler) reconcileRestoringSource(ctx context.Context, s *scope) (outcome, error) {
	noteCopies := func(ctx context.Context) (outcome, error) { return r.noteCopiesOfKept(ctx, s) }
	return r.restore(ctx, s, r.Source, movev1alpha1.ClusterSource, true, noteCopies)
}

// noteCopiesOfKept notes on what the source keeps the copy the target holds
// of it. Those notes serve a later move only: when the target cannot be
// used for that (its Secret, its API server) for longer than
// spec.timeouts.scaleUp into the phase, the source's restore finishes
// without them (unpausing what the source keeps, removing its bypass,
// giving up the claim) rather than wait for a target that may be gone for
// good, and says so in a Warning event.
func (r *MoveOperationReconciler) noteCopiesOfKept(ctx context.Context, s *scope) (outcome, error) {
	o, err := r.tryNoteCopiesOfKept(ctx, s)
	timeout := s.mo.Spec.Timeouts.ScaleUpTimeout()
	if (err == nil && o.isDone()) || time.Since(s.phaseStarted()) <= timeout {
		return o, err
	}
	why := o.message
	if err != nil {
		why = err.Error()
	}
	msg := fmt.Sprintf("the target cannot be used after %s (spec.timeouts.scaleUp), so the source's restore finishes without noting on what it keeps the copies the target holds; a later move of those objects will find their copies in the target as conflicts: %s", timeout, why)
	log.FromContext(ctx).Info(msg)
	r.event(s.mo, "Warning", movev1alpha1.ReasonCopiesNotNoted, string(phaseOf(s.mo)), msg)
	return done(), nil
}

func (r *MoveOperationReconciler) tryNoteCopiesOfKept(ctx context.Context, s *scope) (outcome, error) {
	target, o, err := r.target(ctx, s)
	if err != nil || !o.isDone() {
		return o, err
	}
	return done(), r.recordCopiesOfKept(ctx, s, r.Source, movev1alpha1.ClusterSource, target)
}
