package controllers

import (
	"context"

	kerrors "k8s.io/apimachinery/pkg/util/errors"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/remote"
)

// A phase's step is an ordered list of sub-steps (the row's steps), run by
// runSubSteps on every reconcile from the first that has not finished: a
// new one is an entry in the list and its function. A phase that does one
// thing has a list of one.

// subStep is one entry of a phase's steps.
type subStep struct {
	name string
	// preamble is what must hold for the sub-step besides what the row's
	// preamble gave (see prepare).
	preamble preamble
	// How its progress is known, one of three ways:
	//   - finished, when set, says from what the run already holds (the
	//     recorded plan, the next group to copy) whether it is done: the
	//     progress is recomputed, and a restarted operator finds it from
	//     the clusters again;
	//   - once: it is done once per operator run, which the run records
	//     generically (see memo.finished): each such sub-step is idempotent,
	//     so that a restarted operator, which starts with an empty memo,
	//     does it again and reaches the same result (the bypass finds
	//     itself installed, the pause its objects paused);
	//   - neither: it looks at the clusters on every reconcile (the pods
	//     still running, the controllers still stopped).
	finished func(*memo) bool
	once     bool
	// runs says whether it runs when a sub-step before it did not finish.
	runs runsWhen
	// do performs the sub-step; done() when it is finished, any other
	// outcome (progress, wait, stall, fail) or an error ends the list's
	// run in this reconcile but for the sub-steps that run regardless.
	do stepFunc
}

// runsWhen says when a sub-step runs, given how the ones before it ended
// in this reconcile.
type runsWhen int

const (
	// The zero value: only once every sub-step before it is done.

	// unlessError: also while one before it waits, stalls or fails, but
	// not after an error: it must not wait for them. The outcome stays
	// theirs; its error, if any, is the reconcile's.
	unlessError runsWhen = iota + 1
	// ifUnfinished: only when one before it did not finish, an error
	// included: a fallback. The outcome stays theirs; its error is joined
	// to theirs.
	ifUnfinished
)

// preamble is what must hold before a phase's step (the row's preamble)
// or a sub-step runs. prepare applies it, the one place that
// does, before each sub-step, so that no step asks for it itself.
type preamble struct {
	// target: the target's client, in scope.target (see target: when it
	// cannot be used, the phase waits, stalls or fails as its row says).
	target bool
	// identities: the webhook bypass lets through the identity the
	// operator has now (see followIdentities), in the source, and in the
	// target too when target is set.
	identities bool
}

var (
	// targetOnly: the target's client, before the bypass exists.
	targetOnly = preamble{target: true}
	// sourceBypass: the bypass in the source follows the operator's
	// identity; the target is not needed.
	sourceBypass = preamble{identities: true}
	// bothBypasses: the target's client, and the bypass in both clusters
	// follows the operator's identity.
	bothBypasses = preamble{target: true, identities: true}
)

// prepare makes what n says hold: it gets the target's client once per
// reconcile, and follows the operator's identities (once per client, see
// followIdentities). Anything but done() says why the step cannot run now.
func (r *MoveOperationReconciler) prepare(ctx context.Context, s *scope, n preamble) (outcome, error) {
	// A backup's target is an archive: it has no cluster to get. A
	// restore's is the operator's own cluster.
	if n.target && s.target == nil && !s.mo.Spec.Target.IsBackup() {
		target, o, err := r.target(ctx, s)
		if s.mo.Spec.IsRestore() {
			target, o, err = r.localTarget(), done(), nil
		}
		if err != nil || !o.isDone() {
			return o, err
		}
		s.target = target
	}
	if n.identities {
		var target *remote.Target
		if n.target {
			target = s.target
		}
		if err := r.followIdentities(ctx, s, target); err != nil {
			return outcome{}, err
		}
	}
	return done(), nil
}

// runPhase runs a row's step: its preamble, then its sub-steps.
func (r *MoveOperationReconciler) runPhase(ctx context.Context, s *scope, spec phaseSpec) (outcome, error) {
	if o, err := r.prepare(ctx, s, spec.preamble); err != nil || !o.isDone() {
		return o, err
	}
	return r.runSubSteps(ctx, s, spec.phase, spec.stepsOf(s.mo))
}

// runSubSteps runs steps in order, skipping those finished, and is done
// when the last one is. Once one did not finish, only those that run
// regardless (runs) are run after it.
func (r *MoveOperationReconciler) runSubSteps(ctx context.Context, s *scope, phase movev1alpha1.MovePhase, steps []subStep) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	o, err := done(), error(nil)
	for _, st := range steps {
		if !st.runsAfter(o, err) || st.isFinished(mem, phase) {
			continue
		}
		so, serr := r.runSubStep(ctx, s, st)
		if serr == nil {
			for _, m := range so.reached {
				mem.finish(phase, m)
			}
		}
		if serr == nil && so.isDone() && st.once {
			mem.finish(phase, st.name)
		}
		o, err = st.merge(o, err, so, serr)
	}
	return o, err
}

// runSubStep makes a sub-step's preamble hold, then does it.
func (r *MoveOperationReconciler) runSubStep(ctx context.Context, s *scope, st subStep) (outcome, error) {
	if o, err := r.prepare(ctx, s, st.preamble); err != nil || !o.isDone() {
		return o, err
	}
	o, err := st.do(r, ctx, s)
	if err != nil {
		return outcome{}, err // An error reports no outcome.
	}
	return o, nil
}

// runsAfter says whether the sub-step runs after the ones before it ended
// with o and err.
func (st subStep) runsAfter(o outcome, err error) bool {
	finished := err == nil && o.isDone()
	switch st.runs {
	case unlessError:
		return err == nil
	case ifUnfinished:
		return !finished
	}
	return finished
}

func (st subStep) isFinished(mem *memo, phase movev1alpha1.MovePhase) bool {
	if st.finished != nil {
		return st.finished(mem)
	}
	return st.once && mem.hasFinished(phase, st.name)
}

// merge is how the list's run ended once the sub-step ended with so and
// serr, the ones before it with o and err: while every one finished, as
// the sub-step ended; after one that did not, as that one, with the
// sub-step's error (joined to theirs by a fallback).
func (st subStep) merge(o outcome, err error, so outcome, serr error) (outcome, error) {
	switch {
	case err == nil && o.isDone():
		return so, serr
	case serr == nil:
		return o, err
	case st.runs == unlessError: // err is nil: it does not run after one.
		return o, serr
	}
	return o, kerrors.NewAggregate([]error{err, serr})
}

// finishedKey names a sub-step, or a milestone within one, in
// memo.finished.
func finishedKey(phase movev1alpha1.MovePhase, name string) string {
	return string(phase) + "/" + name
}

// finish records that a sub-step (or a milestone within one) of a phase
// finished in this operator's run.
func (r *memo) finish(phase movev1alpha1.MovePhase, name string) {
	if r.finished == nil {
		r.finished = map[string]bool{}
	}
	r.finished[finishedKey(phase, name)] = true
}

// hasFinished reports whether a sub-step (or a milestone within one) of a
// phase finished in this operator's run.
func (r *memo) hasFinished(phase movev1alpha1.MovePhase, name string) bool {
	return r.finished[finishedKey(phase, name)]
}
