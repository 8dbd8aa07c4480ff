package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// setConditions computes every condition from the facts: the phase, the
// phases entered so far, the failure, and what this reconcile found the
// current phase waiting for. It is the only place conditions are set.
//
// Ready, Reconciling and Stalled follow kstatus: Reconciling is True while
// the move progresses and absent once it ended; Stalled is True when it
// needs a human (bad input, or Failed) and absent otherwise; Ready is True
// only when Done.
func setConditions(s *scope, now time.Time) {
	set := conditionSetter(s.mo, now)
	setStepConditions(s, set)
	setKstatusConditions(s, set)
	setProgressSummary(s.mo)
}

// setter sets one condition of the MoveOperation, observed at its
// generation, now.
type setter func(t string, status metav1.ConditionStatus, reason, message string)

func conditionSetter(mo *movev1alpha1.MoveOperation, now time.Time) setter {
	return func(t string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&mo.Status.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: mo.Generation,
			LastTransitionTime: metav1.NewTime(now),
		})
	}
}

// setStepConditions sets each phase's own condition (the table's): True
// once the phase is behind the move, False with the reason while the move
// is in it or failed there.
func setStepConditions(s *scope, set setter) {
	mo := s.mo
	phase := phaseOf(mo)
	entered := map[movev1alpha1.MovePhase]bool{}
	for _, t := range mo.Status.PhaseTransitions {
		entered[t.Phase] = true
	}
	failedPhase := failedIn(mo)
	for _, step := range phaseOrder {
		if step.condition == "" {
			continue
		}
		switch {
		case phase == step.phase && s.stalled != nil:
			set(step.condition, metav1.ConditionFalse, s.stalled.reason, s.stalled.message)
		case phase == step.phase:
			msg := fmt.Sprintf("%s in progress", step.phase)
			if s.waiting != "" {
				msg = s.waiting
			}
			set(step.condition, metav1.ConditionFalse, movev1alpha1.ReasonProgressing, msg)
		case failedPhase == step.phase:
			set(step.condition, metav1.ConditionFalse, mo.Status.FailureReason, mo.Status.FailureMessage)
		case step.phase == movev1alpha1.PhaseRollingBack && entered[step.phase] && phase == movev1alpha1.PhaseFailed:
			set(step.condition, metav1.ConditionTrue, movev1alpha1.ReasonSucceeded,
				"both clusters are back as they were before the move: objects created in the target deleted, controllers and webhooks restored, source objects unpaused")
		case entered[step.phase]:
			set(step.condition, metav1.ConditionTrue, movev1alpha1.ReasonSucceeded, fmt.Sprintf("%s completed", step.phase))
		}
	}
	if mo.Spec.DryRun && phase == movev1alpha1.PhaseDone {
		set(movev1alpha1.ValidatedCondition, metav1.ConditionTrue, movev1alpha1.ReasonDryRun,
			"dry run: the plan is in status.plan; nothing was written to either cluster")
	}
}

// setKstatusConditions sets Ready, Reconciling and Stalled as kstatus
// reads them: Ready at the end, Stalled while a human must act (or the
// move failed), Reconciling otherwise.
func setKstatusConditions(s *scope, set setter) {
	mo := s.mo
	phase := phaseOf(mo)
	switch {
	case phase == movev1alpha1.PhaseDone:
		reason, msg := movev1alpha1.ReasonSucceeded, "the move completed: every object is in the target and every controller is back"+gitOpsDoneNote(mo)
		if mo.Spec.DryRun {
			reason, msg = movev1alpha1.ReasonDryRun, "dry run completed: the plan is in status.plan; nothing was written to either cluster"
		}
		set(movev1alpha1.ReadyCondition, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&mo.Status.Conditions, movev1alpha1.ReconcilingCondition)
		meta.RemoveStatusCondition(&mo.Status.Conditions, movev1alpha1.StalledCondition)
	case phase == movev1alpha1.PhaseFailed:
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, mo.Status.FailureReason, mo.Status.FailureMessage)
		set(movev1alpha1.StalledCondition, metav1.ConditionTrue, mo.Status.FailureReason, mo.Status.FailureMessage)
		meta.RemoveStatusCondition(&mo.Status.Conditions, movev1alpha1.ReconcilingCondition)
	case s.stalled != nil:
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, s.stalled.reason, s.stalled.message)
		set(movev1alpha1.StalledCondition, metav1.ConditionTrue, s.stalled.reason, s.stalled.message)
		meta.RemoveStatusCondition(&mo.Status.Conditions, movev1alpha1.ReconcilingCondition)
	default:
		reason, msg := movev1alpha1.ReasonProgressing, progressMessage(mo, s.waiting)
		if phase == movev1alpha1.PhasePending && s.waiting != "" {
			reason = movev1alpha1.ReasonWaitingForActiveOperation
		}
		if phase == movev1alpha1.PhaseRollingBack {
			reason = mo.Status.FailureReason
		}
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
		set(movev1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&mo.Status.Conditions, movev1alpha1.StalledCondition)
	}
}

func progressMessage(mo *movev1alpha1.MoveOperation, waiting string) string {
	msg := fmt.Sprintf("phase %s", phaseOf(mo))
	if phaseOf(mo) == movev1alpha1.PhaseRollingBack {
		msg = fmt.Sprintf("rolling back: %s", mo.Status.FailureMessage)
	}
	if waiting != "" {
		msg += ": " + waiting
	}
	return msg
}

// setProgressSummary writes the Progress column: objects copied out of the
// objects the move takes (a dry run copies none).
func setProgressSummary(mo *movev1alpha1.MoveOperation) {
	if p := mo.Status.Progress; p != nil {
		p.Summary = fmt.Sprintf("%d/%d", p.Copied, p.Total)
	}
}

// patchStatus writes the status with an optimistic lock: a reconcile that
// started from a stale copy must not write an older phase over a newer one.
func (r *MoveOperationReconciler) patchStatus(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.base.Status, s.mo.Status) {
		return nil // nothing new: polling reconciles write nothing
	}
	patch := client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, s.mo, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status of MoveOperation %s/%s: %w", s.mo.Namespace, s.mo.Name, err)
	}
	return nil
}
