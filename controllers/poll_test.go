package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

func TestAWaitLooksAgainSoonAtFirstThenNoMoreOftenThanThePollInterval(t *testing.T) {
	for _, tc := range []struct {
		waited, interval, want time.Duration
	}{
		{waited: 0, interval: time.Second, want: minPoll},
		{waited: 150 * time.Millisecond, interval: time.Second, want: minPoll},
		{waited: 600 * time.Millisecond, interval: time.Second, want: 300 * time.Millisecond},
		{waited: 5 * time.Second, interval: time.Second, want: time.Second},
		// An interval shorter than minPoll (the tests' fakes) is kept.
		{waited: 0, interval: time.Millisecond, want: time.Millisecond},
	} {
		if got := pollAfter(tc.waited, tc.interval); got != tc.want {
			t.Errorf("pollAfter(%s, %s) = %s, want %s", tc.waited, tc.interval, got, tc.want)
		}
	}
}

func TestAWaitIsTimedFromWhenItsStepBeganToWaitInItsPhase(t *testing.T) {
	g := NewWithT(t)
	r := &MoveOperationReconciler{PollInterval: time.Second}
	mo := moveIn(pathTo(movev1alpha1.PhaseScalingDown)...)
	mo.UID = "op-poll"
	s := newScope(mo)

	first := r.poll(s, "stop", "controller pods still running")
	g.Expect(first.kind).To(Equal(outcomeWait))
	g.Expect(first.after).To(Equal(minPoll), "a wait that just began looks again soon")
	g.Expect(first.message).To(Equal("waiting: controller pods still running"))

	// The same wait, a while later, looks again less often.
	r.memoOf(mo.UID).waitingSince = time.Now().Add(-3 * time.Second)
	g.Expect(r.poll(s, "stop", "controller pods still running").after).To(Equal(time.Second))

	// Another step's wait, or the same step in another phase, begins anew.
	g.Expect(r.poll(s, "block-move", "blocked").after).To(Equal(minPoll))
	r.memoOf(mo.UID).waitingSince = time.Now().Add(-3 * time.Second)
	mo.Status.Phase = movev1alpha1.PhaseRestoringTarget
	g.Expect(r.poll(s, "block-move", "blocked").after).To(Equal(minPoll))
}
