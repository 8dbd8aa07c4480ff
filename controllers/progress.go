package controllers

import (
	"context"
	"time"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

func progressOf(mo *movev1alpha1.MoveOperation, plan *graph.Plan) *movev1alpha1.MoveProgress {
	if mo.Status.Progress == nil {
		mo.Status.Progress = &movev1alpha1.MoveProgress{Total: int32(plan.Len())}
	}
	return mo.Status.Progress
}

// setCopyProgress sets what Copying has done: the first next groups of the
// pinned plan, out of all of it (which leaves out whatever was deleted since
// Validating counted it).
func setCopyProgress(p *movev1alpha1.MoveProgress, plan *graph.Plan, next int) {
	p.Total = int32(plan.Len())
	p.CopiedGroups = int32(next)
	p.Copied = int32(objectsIn(plan.Groups[:next]))
}

func objectsIn(groups [][]*graph.Object) int {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	return n
}

// DefaultProgressInterval is the ProgressInterval of a reconciler that
// sets none: a user watching `kubectl get moveoperations` sees the
// progress of Copying and Deleting at least once a second, as before for
// any group that takes a second or more, and a move whose groups take a
// few milliseconds (a small fleet) does not write the status, and read
// the target's Secret again, once per group.
const DefaultProgressInterval = time.Second

// groupsFor returns a step that runs step, which does one group of Copying or Deleting and
// reports progressed() when it did, again in the same reconcile while
// more says groups are left and less than r.ProgressInterval has passed:
// the status, written after the reconcile, then counts them all. Each
// group's own record (internal/planrecord) is written as the group is
// done, as before, so a restart loses none of them.
//
// When a group after the first of this reconcile does not finish (an
// error, a wait, a failure), the groups done are reported as progress and
// the next reconcile tries that group again: its outcome is then the
// reconcile's, with the status already counting what was done.
func groupsFor(step stepFunc, more func(*run) bool) stepFunc {
	return func(r *MoveOperationReconciler, ctx context.Context, s *scope) (outcome, error) {
		start := time.Now()
		run := r.runFor(s.mo.UID)
		for done := 0; ; done++ {
			o, err := step(r, ctx, s)
			switch {
			case (err != nil || o.kind != outcomeProgress) && done > 0:
				return progressed(), nil
			case err != nil || o.kind != outcomeProgress:
				return o, err
			case !more(run) || time.Since(start) >= r.ProgressInterval:
				return o, nil
			}
		}
	}
}
