package localcluster

import (
	"errors"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

// A kube-apiserver whose graceful shutdown outlasts envtest's stop timeout
// has been killed by envtest; the stop is not failed for it, but any other
// error of the same stop is kept.
func TestAStopThatHadToKillIsNotAFailure(t *testing.T) {
	timeout := errors.New("timeout waiting for process kube-apiserver to stop")
	other := errors.New("unable to signal for process etcd to stop: permission denied")

	if err := withoutStopTimeouts(kerrors.NewAggregate([]error{timeout})); err != nil {
		t.Errorf("a stop that only timed out: got %v, want no error", err)
	}
	if err := withoutStopTimeouts(timeout); err != nil {
		t.Errorf("a lone timeout: got %v, want no error", err)
	}
	err := withoutStopTimeouts(kerrors.NewAggregate([]error{timeout, other}))
	if err == nil || err.Error() != other.Error() {
		t.Errorf("a timeout and another error: got %v, want %v", err, other)
	}
	if err := withoutStopTimeouts(nil); err != nil {
		t.Errorf("a clean stop: got %v", err)
	}
}
