package controllers

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// The phase table. Each phase has a file of its own (phase_<name>.go) with
// its row and the functions of its sub-steps: the row names the condition
// the phase sets, what must hold before its step (its preamble), its step
// as an ordered list of sub-steps (see substeps.go) and how long an error
// may last there. Where each phase leads (its successor, where a failure
// leads, what deleting the MoveOperation does, where the move's
// controllers are down) is the routes table below, on one screen.
// reconcilePhase, reconcileDelete, scope.fail and setConditions read the
// table; nothing else names a phase's successor.

// stepFunc performs one sub-step of a phase and says what happened.
type stepFunc func(r *MoveOperationReconciler, ctx context.Context, s *scope) (outcome, error)

// deletion is what deleting the MoveOperation does in a phase.
type deletion int

const (
	// deletionReleases: nothing is written yet, or the move has settled:
	// the claim is released and the finalizer removed at once.
	deletionReleases deletion = iota
	// deletionRollsBack: before the point of no return the move rolls
	// back, then the finalizer goes.
	deletionRollsBack
	// deletionFinishes: past the point of no return, or while rolling
	// back, the move goes on to its end first.
	deletionFinishes
)

// phaseSpec is one row of the phase table: what a phase does, in its
// file, and where it leads, from the routes below.
type phaseSpec struct {
	phase movev1alpha1.MovePhase
	// condition is the step condition the phase sets ("" for Pending and
	// the terminal phases).
	condition string
	// preamble is made to hold before each reconcile of the phase's step
	// (see prepare): the target's client, the bypass following the
	// operator's identities.
	preamble preamble
	// steps perform the phase, in order (see runSubSteps); none for the
	// terminal phases.
	steps []subStep
	// backupSteps and restoreSteps, when set, replace steps in a backup
	// (spec.target.archive), which has no target cluster, and in a restore
	// (spec.source.archive), which has no source cluster: see
	// archive_backup.go and archive_restore.go.
	backupSteps, restoreSteps []subStep
	// stallsWithoutTarget is set where a target that cannot be used as
	// given (its Secret, its kubeconfig) needs a human (Stalled=True);
	// elsewhere it is waited for.
	stallsWithoutTarget bool
	// errorBound, when set, is how long the step's error may last before
	// the move fails (see errorBound); nil where errors are retried for
	// as long as they last.
	errorBound *errorBound

	route
}

// route is where a phase leads: the state machine's part of a row.
type route struct {
	// next is the phase entered when the step is done; nextInDryRun, when
	// set, replaces it in a dry run, nextInBackup in a backup (which
	// deletes nothing, and has no target cluster to restore), and
	// nextInRestore in a restore (which has no source cluster).
	next, nextInDryRun, nextInBackup, nextInRestore movev1alpha1.MovePhase
	// onFailure is where a failure leads: Failed when nothing is written
	// yet, RollingBack otherwise. "" where nothing can be undone (past the
	// point of no return, or rolling back already): a failure there stalls
	// the move for a human instead.
	onFailure movev1alpha1.MovePhase
	// onDelete is what deleting the MoveOperation does in the phase.
	onDelete deletion
	// controllersDown says, in a cluster, whether every controller the
	// move stopped is meant to be at zero in the phase, so that every
	// webhook they serve must let the operator through (see
	// reassertBypassAfter); nil where none is.
	controllersDown func(mem *memo, role movev1alpha1.ClusterRole) bool
}

// routes is the state machine on one screen: for each phase, where
// it goes when its step is done, where a failure leads ("" stalls for a
// human: nothing can be undone there), what deleting the MoveOperation
// does, and where the controllers the move stopped are down. Nothing else
// names a phase's successor.
var routes = map[movev1alpha1.MovePhase]route{
	movev1alpha1.PhasePending:     {next: movev1alpha1.PhaseValidating, onFailure: movev1alpha1.PhaseFailed, onDelete: deletionReleases},
	movev1alpha1.PhaseValidating:  {next: movev1alpha1.PhaseRecording, nextInDryRun: movev1alpha1.PhaseDone, onFailure: movev1alpha1.PhaseFailed, onDelete: deletionReleases},
	movev1alpha1.PhaseRecording:   {next: movev1alpha1.PhaseScalingDown, onFailure: movev1alpha1.PhaseRollingBack, onDelete: deletionRollsBack},
	movev1alpha1.PhaseScalingDown: {next: movev1alpha1.PhaseCopying, onFailure: movev1alpha1.PhaseRollingBack, onDelete: deletionRollsBack, controllersDown: downInBoth},
	movev1alpha1.PhaseCopying:     {next: movev1alpha1.PhaseDeleting, nextInBackup: movev1alpha1.PhaseRestoringSource, nextInRestore: movev1alpha1.PhaseRestoringTarget, onFailure: movev1alpha1.PhaseRollingBack, onDelete: deletionRollsBack, controllersDown: downInBoth},
	// ======== the point of no return: nothing after it rolls back ========
	movev1alpha1.PhaseDeleting:        {next: movev1alpha1.PhaseRestoringTarget, onDelete: deletionFinishes, controllersDown: downInBoth},
	movev1alpha1.PhaseRestoringTarget: {next: movev1alpha1.PhaseRestoringSource, nextInRestore: movev1alpha1.PhaseDone, onDelete: deletionFinishes},
	movev1alpha1.PhaseRestoringSource: {next: movev1alpha1.PhaseDone, onDelete: deletionFinishes},
	movev1alpha1.PhaseRollingBack:     {next: movev1alpha1.PhaseFailed, onDelete: deletionFinishes, controllersDown: targetDownWhileCleared},
	movev1alpha1.PhaseDone:            {onDelete: deletionReleases},
	movev1alpha1.PhaseFailed:          {onDelete: deletionReleases},
}

// errorBound bounds how long a step may keep failing: before the point of
// no return no retry may go on for ever with the providers stopped (or the
// source's claim held), so an error that outlasts the bound fails the
// move, which the row's onFailure then rolls back.
type errorBound struct {
	// timeouts names the spec.timeouts fields the bound is made of, as
	// the message says them.
	timeouts string
	bound    func(spec movev1alpha1.MoveOperationSpec) time.Duration
	// since is when the bound starts counting: when the phase began, or
	// when it last made progress.
	since  func(r *MoveOperationReconciler, s *scope) time.Time
	reason string
	// stuck says what outlasted the bound: "still failed after", "made
	// no progress for".
	stuck string
}

// outlasted turns a step's error into the row's failure once it has
// lasted longer than the row's bound.
func (p phaseSpec) outlasted(r *MoveOperationReconciler, s *scope, err error) (outcome, bool) {
	b := p.errorBound
	if b == nil {
		return outcome{}, false
	}
	bound := b.bound(s.mo.Spec)
	if time.Since(b.since(r, s)) <= bound {
		return outcome{}, false
	}
	return failWith(b.reason, fmt.Sprintf("%s %s %s (%s); the move is rolled back: %v", p.phase, b.stuck, bound, b.timeouts, err)), true
}

// sincePhaseStarted counts a bound from when the phase began.
func sincePhaseStarted(_ *MoveOperationReconciler, s *scope) time.Time { return s.phaseStarted() }

// downInBoth: the move's controllers are at zero in both clusters for the
// whole phase (ScalingDown to Deleting).
func downInBoth(*memo, movev1alpha1.ClusterRole) bool { return true }

// successor is the phase that follows p when its step is done.
func (p phaseSpec) successor(mo *movev1alpha1.MoveOperation) movev1alpha1.MovePhase {
	switch {
	case mo.Spec.DryRun && p.nextInDryRun != "":
		return p.nextInDryRun
	case mo.Spec.Target.IsBackup() && p.nextInBackup != "":
		return p.nextInBackup
	case mo.Spec.IsRestore() && p.nextInRestore != "":
		return p.nextInRestore
	}
	return p.next
}

// stepsOf are the sub-steps the phase runs for mo.
func (p phaseSpec) stepsOf(mo *movev1alpha1.MoveOperation) []subStep {
	switch {
	case mo.Spec.Target.IsBackup() && p.backupSteps != nil:
		return p.backupSteps
	case mo.Spec.IsRestore() && p.restoreSteps != nil:
		return p.restoreSteps
	}
	return p.steps
}

var (
	// phaseOrder is the table in the order a move goes through it, rolling
	// back last; phaseTable indexes it. Both are filled by init: the steps
	// read the table, so it cannot be a variable's initial value.
	phaseOrder []phaseSpec
	phaseTable map[movev1alpha1.MovePhase]phaseSpec
)

func init() {
	phaseOrder = []phaseSpec{
		pendingPhase, validatingPhase, recordingPhase, scalingDownPhase, copyingPhase,
		deletingPhase, restoringTargetPhase, restoringSourcePhase, rollingBackPhase,
		{phase: movev1alpha1.PhaseDone},
		{phase: movev1alpha1.PhaseFailed},
	}
	phaseTable = make(map[movev1alpha1.MovePhase]phaseSpec, len(phaseOrder))
	for _, p := range phaseOrder {
		p.route = routes[p.phase]
		phaseTable[p.phase] = p
	}
}

// specOf returns the row of a phase.
func specOf(p movev1alpha1.MovePhase) phaseSpec { return phaseTable[p] }

// Path is the phases a move that succeeds goes through, in order: the
// table's successors from Pending to Done. Whoever follows a move (tests,
// the demo, benchmarks) reads it here rather than list the phases again.
func Path() []movev1alpha1.MovePhase {
	return PathOf(&movev1alpha1.MoveOperation{})
}

// PathOf is the phases mo goes through when it succeeds: a move's (Path),
// a dry run's, a backup's, which skips Deleting and RestoringTarget, or a
// restore's, which skips Deleting and RestoringSource.
func PathOf(mo *movev1alpha1.MoveOperation) []movev1alpha1.MovePhase {
	var out []movev1alpha1.MovePhase
	for p := movev1alpha1.PhasePending; len(out) < len(phaseOrder); p = specOf(p).successor(mo) {
		out = append(out, p)
		if len(specOf(p).steps) == 0 {
			break
		}
	}
	return out
}

// reconcilePhase runs the step of the MoveOperation's current phase (its
// preamble, then its sub-steps), and applies what it reports.
func (r *MoveOperationReconciler) reconcilePhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	spec := specOf(phaseOf(s.mo))
	if len(spec.stepsOf(s.mo)) == 0 { // Done and Failed: nothing left to do but let go.
		r.forgetMemo(s.mo.UID)
		return ctrl.Result{}, r.release(ctx, s.mo)
	}
	o, err := r.runPhase(ctx, s, spec)
	if err != nil {
		r.reassertBypassAfter(ctx, s, err)
		if o, outlasted := spec.outlasted(r, s, err); outlasted {
			return s.apply(spec, o)
		}
		return s.applyError(spec, err)
	}
	return s.apply(spec, o)
}

// apply turns a step's outcome into the MoveOperation's next state, and
// says when to reconcile again.
func (s *scope) apply(spec phaseSpec, o outcome) (ctrl.Result, error) {
	switch o.kind {
	case outcomeDone:
		s.enter(spec.successor(s.mo))
	case outcomeProgress:
	case outcomeWait:
		s.waiting = o.message
		return ctrl.Result{RequeueAfter: o.after}, nil
	case outcomeStall:
		s.stalled = &stall{reason: o.reason, message: o.message}
		return ctrl.Result{RequeueAfter: o.after}, nil
	case outcomeFail:
		s.fail(o.reason, o.message)
		if s.stalled != nil && o.after > 0 {
			// Nowhere to fail to: the move waits for a human, and looks
			// again later rather than at once.
			return ctrl.Result{RequeueAfter: o.after}, nil
		}
	default:
		return ctrl.Result{}, fmt.Errorf("phase %s reported no outcome", spec.phase)
	}
	// Write the status now, then go on.
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// fail ends a move that cannot go on, where the table says: Failed before
// anything was written, RollingBack after. Where nothing can be undone it
// stalls the move instead, for a human. The first failure is the one the
// status keeps.
func (s *scope) fail(reason, message string) {
	to := specOf(phaseOf(s.mo)).onFailure
	if to == "" {
		s.stalled = &stall{reason: reason, message: message}
		return
	}
	if s.mo.Status.FailureReason == "" {
		s.mo.Status.FailureReason = reason
		s.mo.Status.FailureMessage = message
	}
	s.enter(to)
}

// reconcileDelete handles a MoveOperation being deleted, as the table says
// for its phase: before the point of no return the move rolls back, after
// it the move finishes; only then does the finalizer go.
func (r *MoveOperationReconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	switch specOf(phaseOf(mo)).onDelete {
	case deletionReleases:
		if err := r.release(ctx, mo); err != nil {
			return ctrl.Result{}, err
		}
		s.removeFinalizer = true
		r.forgetMemo(mo.UID)
		return ctrl.Result{}, nil
	case deletionRollsBack:
		s.fail(movev1alpha1.ReasonDeletedBeforeCompletion,
			"the MoveOperation was deleted before the point of no return; the move is rolled back and both clusters are left as they were")
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return r.reconcilePhase(ctx, s)
}
