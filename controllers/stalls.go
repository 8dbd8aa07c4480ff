package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// stallEventInterval is how often a move that stays stalled records its
// Warning event again. A stall lasts until a human acts, and whoever
// alerts on events must see it for as long as it lasts, not only when it
// began: the API server drops an event an hour after it was last written
// (--event-ttl). Five minutes is longer than any stalled step's retry (30
// s at most, retryDenied), so this interval, not the retries, bounds the
// events: twelve an hour per stalled move and reason at most, which no
// API server notices. The events library folds the repeats into a series
// of the first event (its count and lastObservedTime), which it writes at
// the second and then at least every 30 minutes.
const stallEventInterval = 5 * time.Minute

// stalls is what the reconciler remembers of stalled moves, by
// MoveOperation: the phase and reason it is counted under in
// move_operator_moves_stalled, and when the Warning event of each of its
// stall reasons was last recorded. None of it is needed to move: a
// restarted operator counts each stalled move again at its first
// reconcile, and reads the events' times back from the Stalled condition
// (stallEventBefore), so that a restart never repeats an event at once.
type stalls struct {
	mu        sync.Mutex
	counted   map[types.NamespacedName]stallLabels
	lastEvent map[types.NamespacedName]map[string]time.Time
}

// stallLabels are the labels a stalled move is counted under.
type stallLabels struct{ phase, reason string }

// count counts a MoveOperation in the gauge under labels, or under none
// when labels is nil, taking it out of what it was counted under before.
func (st *stalls) count(key types.NamespacedName, labels *stallLabels) {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, counted := st.counted[key]
	if counted && labels != nil && old == *labels {
		return
	}
	if counted {
		movesStalled.WithLabelValues(old.phase, old.reason).Dec()
		delete(st.counted, key)
	}
	if labels == nil {
		return
	}
	if st.counted == nil {
		st.counted = map[types.NamespacedName]stallLabels{}
	}
	st.counted[key] = *labels
	movesStalled.WithLabelValues(labels.phase, labels.reason).Inc()
}

// forget drops a MoveOperation that ended or is gone: out of the gauge,
// and its events' times with it.
func (st *stalls) forget(key types.NamespacedName) {
	st.count(key, nil)
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.lastEvent, key)
}

// due reports whether the Warning event of a MoveOperation's stall reason
// is due at now, and if so takes it as recorded then. before is when it
// was last recorded as far as the status tells (stallEventBefore), used
// when this process has not recorded it itself. The times are kept while
// the move goes on, even when it stops being stalled for a reconcile (a
// step's transient error), so that a stall that comes and goes still
// records its event once an interval at most.
func (st *stalls) due(key types.NamespacedName, reason string, now, before time.Time, stalledBefore bool) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	last, recorded := st.lastEvent[key][reason]
	if !recorded && stalledBefore {
		last, recorded = before, true
	}
	if st.lastEvent == nil {
		st.lastEvent = map[types.NamespacedName]map[string]time.Time{}
	}
	if st.lastEvent[key] == nil {
		st.lastEvent[key] = map[string]time.Time{}
	}
	if recorded && now.Sub(last) < stallEventInterval {
		st.lastEvent[key][reason] = last
		return false
	}
	st.lastEvent[key][reason] = now
	return true
}

// recordStall, once the status is written, counts a stalled move in
// move_operator_moves_stalled, and records a Warning event with the
// stall's reason (the Stalled condition's) when it becomes stalled and
// every stallEventInterval while it stays so. A move that ended is not
// counted, Failed included: its Warning event was recorded when it failed,
// and move_operator_operations_completed_total counts it.
func (r *MoveOperationReconciler) recordStall(ctx context.Context, s *scope, now time.Time) {
	key := client.ObjectKeyFromObject(s.mo)
	phase := phaseOf(s.mo)
	if phase.IsTerminal() {
		r.stalls.forget(key)
		return
	}
	if s.stalled == nil {
		r.stalls.count(key, nil)
		return
	}
	reason := s.stalled.reason
	r.stalls.count(key, &stallLabels{phase: string(phase), reason: reason})
	before, stalledBefore := stallEventBefore(s, now)
	if !r.stalls.due(key, reason, now, before, stalledBefore) {
		return
	}
	since := now
	if c := meta.FindStatusCondition(s.mo.Status.Conditions, movev1alpha1.StalledCondition); c != nil {
		since = c.LastTransitionTime.Time
	}
	logger := log.FromContext(ctx)
	if stalledBefore {
		logger = logger.V(1) // said when the stall began
	}
	logger.Info("waiting for a human to act", "reason", reason, "stalledSince", since)
	r.event(s.mo, "Warning", reason, string(phase), fmt.Sprintf("stalled in phase %s since %s: %s",
		phase, since.UTC().Format(time.RFC3339), s.stalled.message))
}

// stallEventBefore is when the Warning event of the move's stall was last
// recorded as far as the status tells, for a process that has not
// recorded it itself (a restarted operator). When this reconcile read the
// MoveOperation it was already Stalled for this reason, so the operator
// that wrote that recorded the event when the stall began (the condition's
// lastTransitionTime) and every stallEventInterval since: the last time,
// at the latest whole interval. A restart may so drop a repetition (one
// due while no operator ran) or bring one forward (the intervals are
// counted from the stall's start, not from the reconciles that recorded
// them), never repeat one at once. stalledBefore is false for a stall that
// begins in this reconcile: its event is due now.
func stallEventBefore(s *scope, now time.Time) (before time.Time, stalledBefore bool) {
	c := meta.FindStatusCondition(s.base.Status.Conditions, movev1alpha1.StalledCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != s.stalled.reason {
		return time.Time{}, false
	}
	since := c.LastTransitionTime.Time
	if now.Before(since) { // another operator's clock ran ahead
		return now, true
	}
	return since.Add(now.Sub(since).Truncate(stallEventInterval)), true
}
