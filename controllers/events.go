package controllers

import (
	"context"
	"fmt"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// recordTransitions emits one event per phase entered in this reconcile and
// updates the metrics, once the new phase is durable.
func (r *MoveOperationReconciler) recordTransitions(ctx context.Context, s *scope) {
	for _, t := range s.transitions {
		observeTransition(s.mo, t.from, t.to, t.at)
		eventType, reason := "Normal", string(t.to)
		note := fmt.Sprintf("phase %s", t.to)
		if t.to == movev1alpha1.PhaseRollingBack || t.to == movev1alpha1.PhaseFailed {
			eventType, reason = "Warning", s.mo.Status.FailureReason
			note = fmt.Sprintf("phase %s: %s", t.to, s.mo.Status.FailureMessage)
		}
		r.event(s.mo, eventType, reason, string(t.to), note)
		log.FromContext(ctx).Info("entered phase", "from", t.from, "to", t.to)
	}
}

// maxEventNote is the most an event's note may hold: the API server refuses
// an event with a longer one, and the event would be lost.
const maxEventNote = 1024

// event records an event, its note cut to what the API server accepts; the
// whole message stays in the status.
func (r *MoveOperationReconciler) event(mo *movev1alpha1.MoveOperation, eventType, reason, action, note string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(mo, nil, eventType, reason, action, "%s", eventNote(note))
}

// eventNote shortens a note to maxEventNote bytes, on a character boundary,
// saying where the rest is.
func eventNote(note string) string {
	if len(note) <= maxEventNote {
		return note
	}
	const more = " ... (cut; the whole message is in the MoveOperation's status)"
	cut := maxEventNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}
