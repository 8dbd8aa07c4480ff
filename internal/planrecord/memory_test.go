package planrecord

import (
	"runtime"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/graph/graphtest"
)

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestARecordedPlanKeepsLittlePerObject measures what a plan read back from
// its record holds per object: Copying and Deleting keep one for the whole
// move. The record of a synthetic fleet of a thousand workload
// clusters is decoded, and the plan's live heap divided by its objects.
func TestARecordedPlanKeepsLittlePerObject(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a fleet of a thousand clusters")
	}
	const clusters = 1000
	g := graph.New(graphtest.Types(), []string{"fleet"})
	if err := graphtest.Fleet(graphtest.Options{Clusters: clusters}, func(obj client.Object) error { return g.Add(obj) }); err != nil {
		t.Fatalf("building the fleet: %v", err)
	}
	parts, err := encode(g.Plan(graph.Selection{}))
	if err != nil {
		t.Fatalf("encoding the plan: %v", err)
	}
	// g and the plan are not used past this point: only the record stays.

	before := liveHeap()
	r := newReader()
	for _, data := range parts {
		if err := r.decode(data); err != nil {
			t.Fatalf("decoding the plan: %v", err)
		}
	}
	p := graph.NewPlan(r.groups)
	retained := liveHeap() - before
	perObject := retained / int64(p.Len())
	t.Logf("N=%d: the recorded plan of %d objects (%d parts) holds %d bytes per object once read back", clusters, p.Len(), len(parts), perObject)
	if perObject > 400 {
		t.Errorf("a recorded plan holds %d bytes per object, want at most 400", perObject)
	}
	runtime.KeepAlive(p)
}
