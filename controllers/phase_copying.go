package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/remote"
)

var copyingPhase = phaseSpec{
	phase:     movev1alpha1.PhaseCopying,
	condition: movev1alpha1.ObjectsCopiedCondition,
	steps:     copyingSteps,
	// Counted from the last progress: a large move copies for longer than
	// the bound, but never makes no progress for that long.
	errorBound: &errorBound{
		timeouts: "spec.timeouts.copy", reason: movev1alpha1.ReasonCopyTimeout, stuck: "made no progress for",
		bound: func(spec movev1alpha1.MoveOperationSpec) time.Duration { return spec.Timeouts.CopyTimeout() },
		since: func(r *MoveOperationReconciler, s *scope) time.Time { return lastCopyProgress(s, r.memoOf(s.mo.UID)) },
	},
}

// lastCopyProgress is when Copying last made progress: when it began, when
// it last copied a group further than before, or, in this operator's run,
// when the run began Copying or last copied a group (again, after a
// restart).
func lastCopyProgress(s *scope, mem *memo) time.Time {
	return latest(lastFurtherCopy(s), mem.copyStarted, mem.lastCopied)
}

// lastFurtherCopy is when Copying began or last copied a group further
// than any run before.
func lastFurtherCopy(s *scope) time.Time {
	since := s.phaseStarted()
	if p := s.mo.Status.Progress; p != nil && p.LastProgressTime != nil {
		since = latest(since, p.LastProgressTime.Time)
	}
	return since
}

func latest(times ...time.Time) time.Time {
	var out time.Time
	for _, t := range times {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// maxCopyStarts is how many times operators may start Copying without
// copying a group further before the copy timeout applies to the restarts:
// one restart (an upgrade, a node drained) copies every group again, which
// can take long at a large fleet, and must not roll the move back; an
// operator that keeps being killed in the same place (out of memory) must.
const maxCopyStarts = 3

// startCopyRun counts, in the status and before anything else of this run
// is done, that an operator run starts Copying. A run killed while it
// copies returns no error to time out on, and the next run copies every
// group again, each a success: without the count, an operator killed at
// the same group every time would keep every provider stopped for ever.
// Once maxCopyStarts runs copied nothing further for spec.timeouts.copy,
// the move rolls back. The count is written before the run goes on; a
// count lost to a status conflict allows one restart more.
func (r *MoveOperationReconciler) startCopyRun(_ context.Context, s *scope) (outcome, error) {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	if mo.Status.Progress == nil {
		mo.Status.Progress = &movev1alpha1.MoveProgress{}
	}
	progress := mo.Status.Progress
	progress.CopyStarts++
	mem.copyStarted = time.Now()
	mem.copiedBefore = int(progress.CopiedGroups)
	timeout := mo.Spec.Timeouts.CopyTimeout()
	if progress.CopyStarts > maxCopyStarts && time.Since(lastFurtherCopy(s)) > timeout {
		return failWith(movev1alpha1.ReasonCopyInterrupted, fmt.Sprintf(
			"operators started Copying %d times without copying more than %d groups (%d objects), and nothing further was copied for %s (spec.timeouts.copy): the operator keeps stopping while it copies (see its restarts, its last logs, and whether it is killed for exceeding its memory limit); the move is rolled back",
			progress.CopyStarts, progress.CopiedGroups, progress.Copied, timeout)), nil
	}
	return progressed(), nil
}

// copyingSteps create the objects in the target, one creation group per
// reconcile so that progress is written after each group. The plan is
// recorded before the first copy (see recordPlan): a restarted operator
// copies exactly that set again. After the last group the source is read
// once more, and a moved set that changed meanwhile (an object created or
// deleted in a moved hierarchy by a writer the move does not stop) fails
// the move, before its point of no return.
//
// An error that persists (a group cannot be copied, the record of the plan
// cannot be written, the source cannot be read again) rolls the move back
// once Copying has made no progress for spec.timeouts.copy (the row's
// errorBound). An operator that keeps restarting while it copies reports no
// error; see startCopyRun.
//
// Their progress is what the run holds: when it began Copying, the plan it
// copies, the next group. A restarted operator starts with none of it, and
// copies every group again: what is in the target, this move's copy,
// counts as progress.
var copyingSteps = []subStep{
	// Before anything else of this run, the target included.
	{name: "count the run", finished: func(mem *memo) bool { return !mem.copyStarted.IsZero() }, do: (*MoveOperationReconciler).startCopyRun},
	{name: "follow the target", preamble: bothBypasses, do: (*MoveOperationReconciler).followTarget},
	{name: "record the plan", finished: func(mem *memo) bool { return mem.copyPlan != nil }, do: (*MoveOperationReconciler).startCopying},
	{name: "count the progress", do: (*MoveOperationReconciler).countCopyProgress},
	// Repeats, one group per reconcile, until none is left.
	{name: "copy the next group", finished: func(mem *memo) bool { return mem.nextCopy >= len(mem.copyPlan.Groups) }, do: (*MoveOperationReconciler).copyNextGroup},
	{name: "verify before deleting", once: true, do: (*MoveOperationReconciler).verifyBeforeDeleting},
	// The last chance to roll back: nothing deletes with a provider running.
	{name: "check still stopped", do: (*MoveOperationReconciler).checkStillStopped},
}

// countCopyProgress says in status.progress what Copying has copied. It
// is derived from the run on every reconcile, never added to: a status
// write lost to a conflict is then made good by the next one. A restarted
// run copies the groups an earlier run copied again: they are in the
// target, and stay counted.
func (r *MoveOperationReconciler) countCopyProgress(_ context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	setCopyProgress(progressOf(s.mo, mem.copyPlan), mem.copyPlan, max(mem.nextCopy, mem.copiedBefore))
	return done(), nil
}

// copyNextGroup copies the plan's next group and counts it: one group per
// reconcile, so that progress is written after each.
func (r *MoveOperationReconciler) copyNextGroup(ctx context.Context, s *scope) (outcome, error) {
	mo, mem, target := s.mo, r.memoOf(s.mo.UID), s.target
	plan := mem.copyPlan
	if _, err := mem.copier.CopyGroup(ctx, mem.nextCopy); err != nil {
		var conflict *move.ConflictError
		if errors.As(err, &conflict) {
			return failWith(movev1alpha1.ReasonTargetConflict, fmt.Sprintf("%s; the move is rolled back: delete it from the target or leave its cluster out of the move", conflict.Error())), nil
		}
		// An object deleted from the source since the plan was
		// recorded does not come back: waiting for the copy timeout
		// would only keep every provider stopped longer.
		var vanished *move.VanishedError
		if errors.As(err, &vanished) {
			return failWith(movev1alpha1.ReasonObjectsChanged, vanished.Error()+"; the move is rolled back: stop whatever deletes them and create a new MoveOperation"), nil
		}
		deadline := lastCopyProgress(s, mem).Add(mo.Spec.Timeouts.CopyTimeout())
		if apierrors.IsUnauthorized(err) {
			return r.copyUnauthorized(ctx, s, target, deadline, err)
		}
		return outcome{}, fmt.Errorf("copying group %d of %d to the target %s (the move rolls back if it makes no progress by %s): %w",
			mem.nextCopy+1, len(plan.Groups), target.Server, deadline.UTC().Format(time.RFC3339), err)
	}
	mem.nextCopy++
	mem.lastCopied = time.Now()
	progress := progressOf(mo, plan)
	if mem.nextCopy > mem.copiedBefore {
		mem.copiedBefore = mem.nextCopy
		progress.LastProgressTime = ptrTime(mem.lastCopied)
		progress.CopyStarts = 1
	}
	setCopyProgress(progress, plan, mem.copiedBefore)
	objectsCopied.Add(float64(len(plan.Groups[mem.nextCopy-1])))
	return progressed(), nil
}

// verifyBeforeDeleting runs once the last group is copied, before the
// point of no return: the moved set must not have changed, and the source
// must accept the deletions.
func (r *MoveOperationReconciler) verifyBeforeDeleting(ctx context.Context, s *scope) (outcome, error) {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	plan := mem.copyPlan
	// The copier's maps (every copied object's target UID) are not
	// needed once the last group is copied: free them before the
	// source is read whole again, which is the move's memory peak.
	mem.copier = nil
	changed, err := r.movedSetChanged(ctx, mo, plan)
	if err != nil {
		return outcome{}, err
	}
	if changed != "" {
		return failWith(movev1alpha1.ReasonObjectsChanged, changed+"; the move is rolled back: stop whatever writes them and create a new MoveOperation"), nil
	}
	// Past the point of no return a deletion the source refuses is
	// retried for ever, every provider stopped: ask first. A rehearsal
	// that fails reads the whole source again on its retry, on purpose:
	// the check of the moved set must stay the last read before
	// Deleting, or an object created meanwhile in a moved hierarchy
	// would be left behind, its owners deleted.
	refusals, err := move.RehearseDeletion(ctx, r.Source, plan, r.Move)
	if err != nil {
		return outcome{}, err
	}
	if len(refusals) > 0 {
		return failWith(movev1alpha1.ReasonDeletionRefused, fmt.Sprintf(
			"the source refuses to let the move delete %d of the objects it moves (asked with dry-run requests before anything is deleted): %s; the move is rolled back: let the operator's identity delete them during the move (a policy or webhook that protects them from deletion), or leave them out of the move",
			len(refusals), move.JoinRefusals(refusals))), nil
	}
	return done(), nil
}

// startCopying records the plan (or reads it back after a restart) and
// prepares the copier, which recognises the copies this move made and
// records each group's as it goes.
func (r *MoveOperationReconciler) startCopying(ctx context.Context, s *scope) (outcome, error) {
	mo, mem, target := s.mo, r.memoOf(s.mo.UID), s.target
	plan, o, err := r.recordPlan(ctx, s, target)
	if err != nil || !o.isDone() {
		return o, err
	}
	targetID, err := remote.ClusterID(ctx, target.Client)
	if err != nil {
		return outcome{}, fmt.Errorf("target cluster: %w", err)
	}
	copies, err := planrecord.LoadCopies(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return outcome{}, err
	}
	copyTarget := &retargetable{Client: target.Client}
	copier := move.NewCopier(r.Source, copyTarget, plan, string(mo.UID), r.Move)
	if mo.Spec.CarriesStatus() || len(plan.TargetVersions()) > 0 {
		targetTypes, err := graph.DiscoverTypes(ctx, target.Client)
		if err != nil {
			return outcome{}, fmt.Errorf("target cluster: %w", err)
		}
		// Objects converted back name in their references the versions
		// the target stores the referenced kinds at.
		copier.ReferencesIn(targetTypes)
		if mo.Spec.CarriesStatus() {
			// The status goes through the target's status subresources.
			copier.CarryStatus(move.StatusSubresources(targetTypes))
		}
	}
	mem.copyPlan = plan
	mem.copyTarget, mem.copyTargetOf, mem.copyTargetID = copyTarget, target, targetID
	mem.copier = copier.RecognizeCopiesIn(targetID).
		WithCopies(copies).
		OnCopied(func(ctx context.Context, group int, uids []types.UID) error {
			return planrecord.SaveCopies(ctx, r.Source, mo, group, uids)
		})
	// After a restart every group is copied again: what is already there,
	// this move's copy, counts as progress.
	mem.nextCopy = 0
	return done(), nil
}

// followTarget points the copier at the client of the kubeconfig the
// target Secret holds now: the credential may have been rotated since the
// copier was made (a token that expires, replaced by whatever refreshes
// it), and the old one refused. The copier keeps what it knows of the
// groups it copied, so the copy goes on where it was. A Secret that now
// names another cluster drops the copier instead, whose UIDs are the old
// cluster's: Copying starts again there, as after a restart.
func (r *MoveOperationReconciler) followTarget(ctx context.Context, s *scope) (outcome, error) {
	mem, target := r.memoOf(s.mo.UID), s.target
	if mem.copier == nil || mem.copyTargetOf == target {
		return done(), nil
	}
	logger := log.FromContext(ctx)
	id, err := remote.ClusterID(ctx, target.Client)
	if err != nil {
		return outcome{}, fmt.Errorf("target cluster: %w", err)
	}
	if id != mem.copyTargetID {
		logger.Info("the target Secret now names another cluster: copying every group again there", "server", target.Server)
		mem.copyPlan, mem.copier, mem.copyTarget, mem.copyTargetOf = nil, nil, nil, nil
		return done(), nil
	}
	logger.Info("the target Secret holds a new kubeconfig: copying on with it", "server", target.Server)
	mem.copyTarget.Client, mem.copyTargetOf = target.Client, target
	return done(), nil
}

// copyUnauthorized handles a group the target refused with 401
// Unauthorized: the credential of the Secret expired or was revoked. The
// Secret is read again at once: when it holds a new kubeconfig already,
// the copy goes on with it now, not after the retry's backoff. Otherwise
// it is an error like any other, bounded by spec.timeouts.copy, that says
// what to mend.
func (r *MoveOperationReconciler) copyUnauthorized(ctx context.Context, s *scope, used *remote.Target, deadline time.Time, err error) (outcome, error) {
	ref := s.mo.Spec.Target.KubeconfigSecretRef
	if now, gerr := r.Targets.Get(ctx, s.mo.Namespace, ref); gerr == nil && now != used {
		log.FromContext(ctx).Info("the target refused the credential it was given, and the target Secret holds a new kubeconfig: copying on with it", "server", now.Server)
		return waitFor(time.Millisecond, "the target refused the old credential; copying on with the new kubeconfig of the target Secret"), nil
	}
	return outcome{}, fmt.Errorf("the target %s refuses the credential of Secret %s/%s (401 Unauthorized: it expired or was revoked); put a valid kubeconfig in the Secret: the move uses it at its next retry, and rolls back if it makes no progress by %s: %w",
		used.Server, s.mo.Namespace, ref.Name, deadline.UTC().Format(time.RFC3339), err)
}
