package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/remote"
)

// scope is what one reconcile of one MoveOperation works with: the object,
// its state before the reconcile (for the status patch), and the facts the
// phase found that the status is computed from.
type scope struct {
	mo   *movev1alpha1.MoveOperation
	base *movev1alpha1.MoveOperation

	// waiting says what the current phase waits for, when it waits.
	waiting string
	// stalled is set when the move cannot go on until a human acts (the
	// target Secret is missing, say); it goes on by itself once they have.
	stalled *stall
	// transitions are the phases entered in this reconcile, for events and
	// metrics once the status is written.
	transitions []transition
	// removeFinalizer is set when a deleted MoveOperation may go.
	removeFinalizer bool

	// target is the target's client, once a sub-step's preamble got it
	// (see prepare): the sub-steps after it in the same reconcile use it.
	target *remote.Target
}

type stall struct{ reason, message string }

type transition struct {
	from, to movev1alpha1.MovePhase
	at       time.Time
}

func newScope(mo *movev1alpha1.MoveOperation) *scope {
	return &scope{mo: mo, base: mo.DeepCopy()}
}

// phaseOf returns the MoveOperation's phase; a new one is Pending.
func phaseOf(mo *movev1alpha1.MoveOperation) movev1alpha1.MovePhase {
	if mo.Status.Phase == "" {
		return movev1alpha1.PhasePending
	}
	return mo.Status.Phase
}

// enter moves the MoveOperation to a phase and records when.
func (s *scope) enter(p movev1alpha1.MovePhase) {
	now := time.Now()
	from := phaseOf(s.mo)
	s.mo.Status.Phase = p
	s.mo.Status.PhaseTransitions = append(s.mo.Status.PhaseTransitions,
		movev1alpha1.PhaseTransition{Phase: p, Time: metav1.NewTime(now)})
	if p.IsTerminal() {
		s.mo.Status.CompletionTime = ptrTime(now)
	}
	s.waiting, s.stalled = "", nil
	s.transitions = append(s.transitions, transition{from: from, to: p, at: now})
}

// phaseStarted returns when the current phase was entered.
func (s *scope) phaseStarted() time.Time {
	ts := s.mo.Status.PhaseTransitions
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].Phase == s.mo.Status.Phase {
			return ts[i].Time.Time
		}
	}
	return s.mo.CreationTimestamp.Time
}

// failedIn returns the phase the move was in when it failed, or "".
func failedIn(mo *movev1alpha1.MoveOperation) movev1alpha1.MovePhase {
	ts := mo.Status.PhaseTransitions
	for i := len(ts) - 1; i > 0; i-- {
		if ts[i].Phase == movev1alpha1.PhaseRollingBack || (ts[i].Phase == movev1alpha1.PhaseFailed && ts[i-1].Phase != movev1alpha1.PhaseRollingBack) {
			return ts[i-1].Phase
		}
	}
	return ""
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
