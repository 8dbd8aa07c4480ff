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
	{name: "choose the plan", finished: func(mem *memo) bool { return mem.deletePlan != nil }, do: (*MoveOperationReconciler).startDeleting},
	{name: "count the progress", do: (*MoveOperationReconciler).countDeleteProgress},
	// Repeats, one group per reconcile, until none is left.
	{name: "delete the next group", finished: func(mem *memo) bool { return mem.nextDelete < 0 }, do: (*MoveOperationReconciler).deleteNextGroup},
}

// countDeleteProgress says in status.progress what Deleting has deleted,
// on every reconcile (see countCopyProgress).
func (r *MoveOperationReconciler) countDeleteProgress(_ context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	mem.countDeleted(progressOf(s.mo, mem.deletePlan))
	return done(), nil
}

// countDeleted sets in p what the status counted before this run's plan
// and what the run deleted since.
func (r *memo) countDeleted(p *movev1alpha1.MoveProgress) {
	p.Deleted = r.deletedBefore + r.deleted
	p.DeletedGroups = r.deletedGroupsBefore + r.deletedGroups
}

// deleteNextGroup deletes the plan's next group from the source and
// counts it.
func (r *MoveOperationReconciler) deleteNextGroup(ctx context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	result, err := move.DeleteGroup(ctx, r.Source, mem.deletePlan, mem.nextDelete, r.Move)
	if err != nil {
		return outcome{}, fmt.Errorf("deleting group %d from the source (past the point of no return the move only goes forward): %w", mem.nextDelete+1, err)
	}
	mem.nextDelete--
	mem.deleted += int32(result.Deleted + result.Gone)
	mem.deletedGroups++
	progress := progressOf(s.mo, mem.deletePlan)
	mem.countDeleted(progress)
	progress.LastProgressTime = ptrTime(time.Now())
	objectsDeleted.Add(float64(result.Deleted))
	return progressed(), nil
}

// startDeleting chooses the plan Deleting removes: the one this process
// copied just now, or, after a restart, the recorded one.
func (r *MoveOperationReconciler) startDeleting(ctx context.Context, s *scope) (outcome, error) {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	if mem.copyPlan != nil && mem.nextCopy == len(mem.copyPlan.Groups) {
		// This process copied every group of this plan just now, and
		// nothing has written to the source since: its controllers are
		// stopped and the copy only reads it. Reading every kind again
		// would find the same objects.
		mem.deletePlan = mem.copyPlan
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
		mem.deletePlan = plan
	}
	mem.copier = nil
	mem.nextDelete = len(mem.deletePlan.Groups) - 1
	// What the status counted before this plan (a restart rebuilds it from
	// what is left in the source): the run counts on from there.
	p := progressOf(mo, mem.deletePlan)
	mem.deletedBefore, mem.deletedGroupsBefore = p.Deleted, p.DeletedGroups
	mem.deleted, mem.deletedGroups = 0, 0
	return done(), nil
}
