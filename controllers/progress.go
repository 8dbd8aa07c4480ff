package controllers

import (
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
