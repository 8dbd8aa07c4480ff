package mover

import (
	"strings"
	"testing"
)

func TestClusterctlLogMarksMilestonesAndWritesWhatTheCLIShows(t *testing.T) {
	var out strings.Builder
	l := &ClusterctlLog{out: &out}
	tl := ClusterctlTimeline()
	l.Follow(tl)
	l.Info(0, "Performing move...")
	l.Info(1, ClusterctlPausing)
	l.Info(1, "Creating", "Cluster", "c1")
	l.Info(0, ClusterctlCreating)
	l.Info(5, "Resource is ready to move")
	l.Info(5, "Retrying with backoff", "cause", "conflict")
	l.Info(1, ClusterctlResuming)
	l.Follow(nil)
	l.Info(0, ClusterctlDeleting)

	for _, step := range []string{ClusterctlPausing, ClusterctlCreating, ClusterctlResuming} {
		if tl.Seen(step).IsZero() {
			t.Errorf("the timeline did not see %q", step)
		}
	}
	if !tl.Seen(ClusterctlDeleting).IsZero() {
		t.Errorf("the timeline saw %q, logged after it was no longer followed", ClusterctlDeleting)
	}
	written := out.String()
	for _, msg := range []string{"Performing move...", ClusterctlPausing, ClusterctlCreating, "Retrying with backoff", ClusterctlResuming, ClusterctlDeleting} {
		if !strings.Contains(written, msg) {
			t.Errorf("the log lacks %q:\n%s", msg, written)
		}
	}
	for _, msg := range []string{"Creating [", "Resource is ready to move"} {
		if strings.Contains(written, msg) {
			t.Errorf("the log holds %q, which the CLI does not show by default:\n%s", msg, written)
		}
	}
}
