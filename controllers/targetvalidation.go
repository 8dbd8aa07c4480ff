package controllers

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/move"
)

// validateInTarget checks the moved objects chosen by spec.targetValidation
// with the target's own webhooks, once its providers run again and the
// bypass is gone (see move.ValidateInTarget). Past the point of no return a
// refusal cannot undo the move, and the objects are in the target already:
// each is reported, as a Warning event and a plan warning, and the move
// goes on. A check that cannot be made is reported the same way rather than
// holding up the restore of the controllers. It reports whether the check
// was made now (the milestone targetValidated, which the driver records).
func (r *MoveOperationReconciler) validateInTarget(ctx context.Context, s *scope, target client.Client) bool {
	mo := s.mo
	mode := mo.Spec.TargetValidation
	if mode == "" {
		mode = movev1alpha1.TargetValidationSample
	}
	mem := r.memoOf(mo.UID)
	if mode == movev1alpha1.TargetValidationNone || mem.hasFinished(movev1alpha1.PhaseRestoringTarget, targetValidated) {
		return false
	}
	plan, err := r.recordedPlan(ctx, mo)
	if err != nil {
		r.reportTargetValidation(s, fmt.Sprintf("the moved objects were not checked with the target's webhooks (spec.targetValidation %s): %v", mode, err))
		return false
	}
	objects := move.Sample(plan)
	if mode == movev1alpha1.TargetValidationAll {
		objects = move.Copied(plan)
	}
	began := time.Now()
	refusals, err := move.ValidateInTarget(ctx, target, plan, objects, r.Move)
	log.FromContext(ctx).Info("checked the moved objects with the target's webhooks", "mode", string(mode),
		"objects", len(objects), "refused", len(refusals), "duration", time.Since(began).Round(time.Millisecond).String())
	if err != nil {
		r.reportTargetValidation(s, fmt.Sprintf("the moved objects could not all be checked with the target's webhooks (spec.targetValidation %s): %v", mode, err))
	}
	if len(refusals) > 0 {
		r.reportTargetValidation(s, fmt.Sprintf(
			"the target's webhooks refuse %d moved objects (checked with a dry-run update, spec.targetValidation %s); they are in the target, but their controllers' next write will be refused too until they are fixed: %s",
			len(refusals), mode, move.JoinRefusals(refusals)))
	}
	return err == nil
}

// targetValidated is recorded in the move's memo (see memo.finished) once the moved
// objects were checked with the target's webhooks: a reconcile that reads
// a stale MoveOperation from the cache repeats RestoringTarget's last
// steps; the check need not.
const targetValidated = "the moved objects checked with the target's webhooks"

func (r *MoveOperationReconciler) reportTargetValidation(s *scope, msg string) {
	r.event(s.mo, "Warning", movev1alpha1.ReasonTargetValidationFailed, string(movev1alpha1.PhaseRestoringTarget), msg)
	if s.mo.Status.Plan == nil {
		s.mo.Status.Plan = &movev1alpha1.MovePlan{}
	}
	for _, w := range s.mo.Status.Plan.Warnings {
		if w == msg {
			return
		}
	}
	s.mo.Status.Plan.Warnings = append(s.mo.Status.Plan.Warnings, msg)
}
