package mover

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Timeline is when a move began, ended, and first showed each of its steps
// (the operator's phases, clusterctl's log milestones).
type Timeline struct {
	Began, Ended time.Time
	// order is every step the mover can go through, in order, seen or not.
	order []string

	mu   sync.Mutex
	seen map[string]time.Time
}

func newTimeline(order []string) *Timeline {
	return &Timeline{Began: time.Now(), order: order, seen: map[string]time.Time{}}
}

// observe records the first time a step was seen.
func (t *Timeline) observe(step string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[step]; !ok && step != "" {
		t.seen[step] = at
	}
}

// Reached is when the move was first seen at step or past it: a step
// shorter than the gap between two observations is never seen itself, and
// then the next one seen stands for it. Zero if the move never got there.
// Observations come after the fact, so the move reached the step at or
// before this time, never after.
func (t *Timeline) Reached(step string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	past := false
	for _, s := range t.order {
		past = past || s == step
		if at, ok := t.seen[s]; past && ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// Seen is when step itself was first seen; zero if it never was.
func (t *Timeline) Seen(step string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen[step]
}

// String lists the steps seen, with their offsets from the beginning.
func (t *Timeline) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, s := range t.order {
		if at, ok := t.seen[s]; ok {
			parts = append(parts, fmt.Sprintf("%s +%s", s, at.Sub(t.Began).Round(time.Millisecond)))
		}
	}
	if !t.Ended.IsZero() {
		parts = append(parts, fmt.Sprintf("ended +%s", t.Ended.Sub(t.Began).Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}
