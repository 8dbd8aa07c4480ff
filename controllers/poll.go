package controllers

import (
	"time"
)

// minPoll is how soon a wait looks again at first.
const minPoll = 100 * time.Millisecond

// poll is the outcome of a step that waits for something outside the
// operator (pods to go, Deployments to become Available, block-move to be
// lifted). It looks again soon at first, then half as long again as it has
// waited so far, up to PollInterval: on a quiet cluster pods go and come
// back within a second, and every provider stays stopped until they have,
// so a wait that looked only once a second would add up to a second to
// each of a move's waits; one that lasts looks no more often than
// PollInterval. step names the wait within the phase.
func (r *MoveOperationReconciler) poll(s *scope, step, message string) outcome {
	mem := r.memoOf(s.mo.UID)
	key := string(s.mo.Status.Phase) + "/" + step
	if mem.waiting != key {
		mem.waiting, mem.waitingSince = key, time.Now()
	}
	return waitFor(pollAfter(time.Since(mem.waitingSince), r.PollInterval), "waiting: "+message)
}

// pollAfter is how long a wait that has lasted waited looks again after.
func pollAfter(waited, interval time.Duration) time.Duration {
	return min(max(waited/2, minPoll), interval)
}
