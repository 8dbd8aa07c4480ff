package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/move"
)

var deletingPhase = phaseSpec{
	phase:           movev1alpha1.PhaseDeleting,
	condition:       movev1alpha1.ObjectsDeletedCondition,
	step:            (*MoveOperationReconciler).reconcileDeleting,
	next:            movev1alpha1.PhaseRestoringTarget,
	onDelete:        deletionFinishes,
	controllersDown: downInBoth,
}

// reconcileDeleting deletes the moved objects from the source, last group
// first. This is the point of no return: errors are retried, never rolled
// back.
func (r *MoveOperationReconciler) reconcileDeleting(ctx context.Context, s *scope) (outcome, error) {
	mo := s.mo
	run := r.runFor(mo.UID)
	if run.deletePlan == nil {
		if err := r.startDeleting(ctx, s, run); err != nil {
			return outcome{}, err
		}
	}
	plan := run.deletePlan
	progress := progressOf(mo, plan)
	progress.Deleted = run.deletedBefore + run.deleted
	progress.DeletedGroups = run.deletedGroupsBefore + run.deletedGroups
	if run.nextDelete < 0 {
		return done(), nil
	}
	result, err := move.DeleteGroup(ctx, r.Source, plan, run.nextDelete, r.Move)
	if err != nil {
		return outcome{}, fmt.Errorf("deleting group %d from the source (past the point of no return the move only goes forward): %w", run.nextDelete+1, err)
	}
	run.nextDelete--
	run.deleted += int32(result.Deleted + result.Gone)
	run.deletedGroups++
	progress.Deleted = run.deletedBefore + run.deleted
	progress.DeletedGroups = run.deletedGroupsBefore + run.deletedGroups
	progress.LastProgressTime = ptrTime(time.Now())
	objectsDeleted.Add(float64(result.Deleted))
	return progressed(), nil
}

// startDeleting chooses the plan Deleting removes: the one this process
// copied just now, or, after a restart, the recorded one.
func (r *MoveOperationReconciler) startDeleting(ctx context.Context, s *scope, run *run) error {
	mo := s.mo
	if run.copyPlan != nil && run.nextCopy == len(run.copyPlan.Groups) {
		// This process copied every group of this plan just now, and
		// nothing has written to the source since: its controllers are
		// stopped and the copy only reads it. Reading every kind again
		// would find the same objects.
		run.deletePlan = run.copyPlan
	} else {
		// After a restart: the recorded plan. The objects already deleted
		// are gone, which DeleteGroup counts as progress.
		plan, err := r.recordedPlan(ctx, mo)
		if errors.Is(err, errNoRecord) {
			// Past the point of no return the move goes on: it deletes, of
			// what the rules move now, only the objects whose copy the
			// target holds.
			plan, err = r.planOfCopies(ctx, s)
		}
		if err != nil {
			return err
		}
		run.deletePlan = plan
	}
	run.copier = nil
	run.nextDelete = len(run.deletePlan.Groups) - 1
	// What the status counted before this plan (a restart rebuilds it from
	// what is left in the source): the run counts on from there.
	p := progressOf(mo, run.deletePlan)
	run.deletedBefore, run.deletedGroupsBefore = p.Deleted, p.DeletedGroups
	run.deleted, run.deletedGroups = 0, 0
	return nil
}
