package backup

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/graph"
)

// An archive whose index names no pause would be restored as clusterctl's,
// resuming every paused Cluster: a backup that does not name the operation
// that paused the plan is refused before it reads anything.
func TestABackupNamesTheOperationThatPausedItsClusters(t *testing.T) {
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = Write(context.Background(), nil, graph.NewPlan(nil), w, About{})
	if err == nil || !strings.Contains(err.Error(), "About.PausedBy") {
		t.Errorf("a backup naming no pause returned %v, want a refusal that says what to name", err)
	}
}
