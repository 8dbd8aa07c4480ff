package graph_test

import (
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/graph/graphtest"
)

// planHeapProfile, when set, names a file the memory test writes a heap
// profile to while the plan of the largest fleet is alive, for
// `go tool pprof -top -sample_index=inuse_space`.
var planHeapProfile = flag.String("plan-heap-profile", "", "write a heap profile of the largest fleet's plan to this file")

// planMemory is what the move keeps of a fleet, in bytes of live heap.
type planMemory struct {
	objects int // objects read
	moved   int // objects the plan moves
	// graph is what the graph retains once every object was added;
	// graphAndPlan once the plan is built too; plan once the graph is
	// dropped, which is what a move holds from Validating to Done.
	graph, graphAndPlan, plan int64
	// planAllocated is what computing the plan allocates, kept or not: the
	// garbage that sets how far the heap grows above what stays.
	planAllocated int64
}

func perObject(bytes int64, objects int) int64 { return bytes / int64(max(objects, 1)) }

// liveHeap returns the bytes of live heap after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// measurePlan builds the graph of a synthetic fleet one object at a time, as
// Discover does (each object decoded, added, then dropped), plans it, and
// measures what stays at each step.
func measurePlan(t testing.TB, clusters int, profile string) planMemory {
	t.Helper()
	before := liveHeap()
	g := graph.New(graphtest.Types(), []string{"fleet"})
	var m planMemory
	err := graphtest.Fleet(graphtest.Options{Clusters: clusters}, func(obj client.Object) error {
		m.objects++
		return g.Add(obj)
	})
	if err != nil {
		t.Fatalf("building the fleet: %v", err)
	}
	m.graph = liveHeap() - before

	allocatedBefore := totalAllocated()
	p := g.Plan(graph.Selection{})
	m.planAllocated = totalAllocated() - allocatedBefore
	m.moved = p.Len()
	m.graphAndPlan = liveHeap() - before
	runtime.KeepAlive(g)
	g = nil //nolint:ineffassign,wastedassign // dropped so that the next measure shows the plan alone

	m.plan = liveHeap() - before
	if profile != "" {
		writeHeapProfile(t, profile)
	}
	runtime.KeepAlive(p)
	return m
}

func totalAllocated() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.TotalAlloc)
}

func writeHeapProfile(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("creating the heap profile: %v", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatalf("writing the heap profile: %v", err)
	}
}

// TestThePlanOfAFleetKeepsLittlePerObject measures, without any cluster,
// what the move keeps in memory per object of a fleet shaped like the
// benchmark's (45 objects per workload cluster): the graph while the plan is
// computed, and the plan that the move holds from Validating to Done. It
// bounds the bytes per object, so that the memory of a move grows slowly
// with the fleet (issue #18).
func TestThePlanOfAFleetKeepsLittlePerObject(t *testing.T) {
	sizes := []int{100, 1000}
	if testing.Short() {
		sizes = []int{100}
	}
	if *planHeapProfile != "" {
		// Sample every allocation of 4 KiB, so that the profile sees the
		// small objects a graph is made of.
		runtime.MemProfileRate = 4096
	}
	for i, n := range sizes {
		profile := ""
		if i == len(sizes)-1 {
			profile = *planHeapProfile
		}
		m := measurePlan(t, n, profile)
		t.Logf("N=%d: %d objects read, %d moved; bytes per object read: graph %d, graph and plan %d, plan alone %d; allocated by Plan %d",
			n, m.objects, m.moved, perObject(m.graph, m.objects), perObject(m.graphAndPlan, m.objects), perObject(m.plan, m.objects),
			perObject(m.planAllocated, m.objects))
		if want := n*graphtest.ObjectsPerCluster + graphtest.SharedObjects; m.objects != want {
			t.Errorf("N=%d: the fleet has %d objects, want %d", n, m.objects, want)
		}
	}
}
