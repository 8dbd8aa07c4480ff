package controllers

import (
	"time"
)

// outcome is what one reconcile of a phase's step reports. The step says
// what happened; reconcilePhase alone turns it into the next phase, a
// requeue and the conditions, by the phase table.
//
// A step that cannot check or write what it must returns an error instead:
// it is retried with the controller's backoff, logged once per distinct
// error, reported as a Warning event when it repeats, and named in the
// Ready condition meanwhile.
type outcome struct {
	kind outcomeKind
	// after is when to reconcile again (wait, stall).
	after time.Duration
	// reason is the condition reason (stall, fail).
	reason string
	// message says what the move waits for (wait), what a human must do
	// (stall), or why the move cannot go on (fail).
	message string
	// reached names the milestones within the sub-step that it passed,
	// whatever its outcome (the target's controllers scaled up while the
	// step waits for them to be Available): the driver records them in the
	// move's memo under the phase (see runSubSteps), as it records a
	// sub-step done once.
	reached []string
}

type outcomeKind int

const (
	// The zero value is no outcome: a step must say what happened, and
	// one that does not is an error (scope.apply).

	// outcomeDone: the phase is complete; the table names the next one.
	outcomeDone outcomeKind = iota + 1
	// outcomeProgress: the step did part of the phase (a group copied);
	// the status is written, and the step runs again at once.
	outcomeProgress
	// outcomeWait: the phase waits for something that comes by itself
	// (pods to go, a claim to be released).
	outcomeWait
	// outcomeStall: the phase waits for a human (a Secret to fix, a
	// Deployment to repair); Stalled is True meanwhile, and the move goes
	// on by itself once they have acted.
	outcomeStall
	// outcomeFail: the move cannot go on; the table says whether it ends
	// Failed or rolls back first.
	outcomeFail
)

func done() outcome { return outcome{kind: outcomeDone} }

func progressed() outcome { return outcome{kind: outcomeProgress} }

func waitFor(after time.Duration, message string) outcome {
	return outcome{kind: outcomeWait, after: after, message: message}
}

func stallOn(after time.Duration, reason, message string) outcome {
	return outcome{kind: outcomeStall, after: after, reason: reason, message: message}
}

func failWith(reason, message string) outcome {
	return outcome{kind: outcomeFail, reason: reason, message: message}
}

// reaching returns o with the milestones passed on the way to it.
func (o outcome) reaching(milestones ...string) outcome {
	o.reached = append(append([]string(nil), o.reached...), milestones...)
	return o
}

// isDone reports whether a part of a step finished, so that the step goes
// on with its next part; any other outcome is the step's own.
func (o outcome) isDone() bool { return o.kind == outcomeDone }
