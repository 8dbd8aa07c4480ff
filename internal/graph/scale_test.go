package graph

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestPlanOfAHundredClustersIsFastAndSmall builds the plan of a fleet the size the
// operator must handle (100 Clusters, about 2,100 objects here, 3,800 with
// the fixture's full object set) and checks that it stays fast and small:
// the graph keeps only what the rules need of each object.
func TestPlanOfAHundredClustersIsFastAndSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a large graph")
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var objs = fleetCluster("ns0", "c0")[:0]
	for i := range 100 {
		objs = append(objs, fleetCluster(fmt.Sprintf("ns%d", i%4), fmt.Sprintf("c%d", i))...)
	}

	began := time.Now()
	g := build(t, nil, objs...)
	p := g.Plan(Selection{})
	took := time.Since(began)

	// objs is not used past this point: only the graph and the plan stay reachable.
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d objects planned in %d groups in %s; graph and plan retain %.1f MiB", p.Len(), len(p.Groups), took.Round(time.Millisecond), float64(retained)/(1<<20))
	if p.Len() != 2100 {
		t.Errorf("plan holds %d objects, want 2100", p.Len())
	}
	if took > 5*time.Second {
		t.Errorf("planning took %s, want well under 5s", took)
	}
	if retained > 8<<20 {
		t.Errorf("graph and plan retain %d MiB, want under 8 MiB", retained>>20)
	}
	runtime.KeepAlive(g)
	runtime.KeepAlive(p)
}
