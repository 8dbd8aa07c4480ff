package backup

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planner"
)

// About says what a backup took, for its archive's index.
type About struct {
	// Selection is what the backup's spec asked for.
	Selection planner.Selection
	// Source is the source cluster's ID (remote.ClusterID).
	Source types.UID
	// PausedBy is the operation whose pauses the archived objects carry.
	PausedBy string
}

// Write writes the plan's objects, read from source group by group in
// creation order, to w, then closes w with an index that says what the
// backup took. It reads one page at a time: a backup's memory does not grow
// with the fleet. An error leaves w unclosed, which no reader accepts as an
// archive, and abandoned (archive.Writer.Abandon).
func Write(ctx context.Context, source client.Reader, p *graph.Plan, w *archive.Writer, about About) (err error) {
	defer func() {
		if err != nil {
			w.Abandon()
		}
	}()
	if about.PausedBy == "" {
		// An index that names no pause is read as clusterctl's, whose
		// restore resumes every paused Cluster, a user's pauses too.
		return errors.New("backing up: the operation that paused the plan's Clusters is not named; pause them (move.Pause) and name the operation in About.PausedBy")
	}
	for group := range p.Groups {
		err := move.ReadGroup(ctx, source, p, group, func(_ *graph.Object, obj *unstructured.Unstructured) error {
			return w.Add(group, obj)
		})
		if err != nil {
			return fmt.Errorf("backing up: %w", err)
		}
	}
	ix := archive.Index{Source: about.Source, Namespaces: about.Selection.Namespaces, PausedBy: about.PausedBy}
	if about.Selection.Clusters != nil {
		ix.ClusterSelector = about.Selection.Clusters.String()
	}
	if err := w.Close(ix); err != nil {
		return fmt.Errorf("backing up: %w", err)
	}
	return nil
}
