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
	phase:     movev1alpha1.PhaseDeleting,
	condition: movev1alpha1.ObjectsDeletedCondition,
	steps:     deletingSteps,
}

// deletingSteps delete the moved objects from the source, last group
// first, one group per reconcile. This is the point of no return: errors
// are retried, never rolled back. Their progress is what the run holds:
// the plan and the next group to delete; a restarted operator deletes by
// the recorded plan, and finds what it deleted gone.
var deletingSteps = []subStep{
	{name: "choose the plan", finished: func(run *run) bool { return run.deletePlan != nil }, do: (*MoveOperationReconciler).startDeleting},
	{name: "count the progress", do: (*MoveOperationReconciler).countDeleteProgress},
	// Repeats, one group per reconcile, until none is left.
	{name: "delete the next group", finished: func(run *run) bool { return run.nextDelete < 0 }, do: (*MoveOperationReconciler).deleteNextGroup},
}

// countDeleteProgress says in status.progress what Deleting has deleted,
// on every reconcile (see countCopyProgress).
func (r *MoveOperationReconciler) countDeleteProgress(_ context.Context, s *scope) (outcome, error) {
	run := r.runFor(s.mo.UID)
	run.countDeleted(progressOf(s.mo, run.deletePlan))
	return done(), nil
}

// countDeleted sets in p what the status counted before this run's plan
// and what the run deleted since.
func (r *run) countDeleted(p *movev1alpha1.MoveProgress) {
	p.Deleted = r.deletedBefore + r.deleted
	p.DeletedGroups = r.deletedGroupsBefore + r.deletedGroups
}

// deleteNextGroup deletes the plan's next group from the source and
// counts it.
func (r *MoveOperationReconciler) deleteNextGroup(ctx context.Context, s *scope) (outcome, error) {
	run := r.runFor(s.mo.UID)
	result, err := move.DeleteGroup(ctx, r.Source, run.deletePlan, run.nextDelete, r.Move)
	if err != nil {
		return outcome{}, fmt.Errorf("deleting group %d from the source (past the point of no return the move only goes forward): %w", run.nextDelete+1, err)
	}
	run.nextDelete--
	run.deleted += int32(result.Deleted + result.Gone)
	run.deletedGroups++
	progress := progressOf(s.mo, run.deletePlan)
	run.countDeleted(progress)
	progress.LastProgressTime = ptrTime(time.Now())
	objectsDeleted.Add(float64(result.Deleted))
	return progressed(), nil
}

// startDeleting chooses the plan Deleting removes: the one this process
// copied just now, or, after a restart, the recorded one.
func (r *MoveOperationReconciler) startDeleting(ctx context.Context, s *scope) (outcome, error) {
	mo, run := s.mo, r.runFor(s.mo.UID)
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
			return outcome{}, err
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
	return done(), nil
}
