package controllers_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/snapshot"
)

// crashSweepEnv selects the full sweep (every write) instead of the subset
// CI runs (every phase boundary plus a fixed stride): make test-crash.
const crashSweepEnv = "MOVE_OPERATOR_CRASH_SWEEP"

// crashFromEnv, when set to a number K, starts the full sweep at write K, to
// continue a sweep that was stopped part-way.
const crashFromEnv = "MOVE_OPERATOR_CRASH_FROM"

// crashStride is the stride of the subset: every crashStride-th write.
const crashStride = 15

// TestTheMoveFinishesAfterACrashAtAnyWrite stops the operator just before
// its k-th write to either cluster (status writes included), starts a fresh
// one, and checks the move still ends Done in the state an uninterrupted move
// reaches: the fleet in the target exactly, nothing left in the source but
// global objects, every controller and webhook as before, nothing labelled
// or paused. Each crash point gets a fleet of its own instead of new
// clusters.
func TestTheMoveFinishesAfterACrashAtAnyWrite(t *testing.T) {
	ensureSetup(t)
	began := time.Now()
	reference := runCrashPoint(t, 0)
	t.Logf("an uninterrupted move made %d writes; phase boundaries at writes %v", reference.writes, reference.boundaries)

	var points []int64
	if os.Getenv(crashSweepEnv) == "full" {
		from, _ := strconv.ParseInt(os.Getenv(crashFromEnv), 10, 64)
		for k := max(from, 1); k <= reference.writes; k++ {
			points = append(points, k)
		}
	} else {
		points = subset(reference.writes, reference.boundaries, crashStride)
	}
	failed := 0
	for _, k := range points {
		if !t.Run(fmt.Sprintf("a crash before write %d", k), func(t *testing.T) { runCrashPoint(t, k) }) {
			failed++
		}
	}
	t.Logf("crash sweep: %d crash points out of %d writes, %d failed, in %s", len(points), reference.writes, failed, time.Since(began).Round(time.Second))
}

// subset is what CI sweeps of writes 1..writes: every phase boundary and
// every stride-th write, in order.
func subset(writes int64, boundaries []int64, stride int64) []int64 {
	seen := map[int64]bool{}
	for _, k := range boundaries {
		if k >= 1 && k <= writes {
			seen[k] = true
		}
	}
	for k := int64(1); k <= writes; k += stride {
		seen[k] = true
	}
	points := make([]int64, 0, len(seen))
	for k := range seen {
		points = append(points, k)
	}
	slices.Sort(points)
	return points
}

type crashResult struct {
	// writes is how many writes the (last) operator made.
	writes int64
	// boundaries are the writes that changed the MoveOperation's phase.
	boundaries []int64
}

// runCrashPoint moves a fresh minimal fleet with an operator that crashes
// before its k-th write (never, for k = 0), then finishes the move with a
// fresh operator and checks the result.
func runCrashPoint(t *testing.T, k int64) crashResult {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := fmt.Sprintf("crash%d-%s", k, rand.String(3))
	f := createFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})
	stateBefore := stateOf(ctx, g)
	before := inNamespaces(take(ctx, g, env.Source, f.Namespaces), f.Namespaces...)
	ops := opsNamespace(t)

	var (
		mu         sync.Mutex
		boundaries []int64
		lastPhase  movev1alpha1.MovePhase
		op         *operator
	)
	op = startOperator(t, operatorOptions{crashAt: k, onWrite: func(_, verb string, obj client.Object) {
		mo, ok := obj.(*movev1alpha1.MoveOperation)
		if !ok || verb != "patch/status" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if mo.Status.Phase != lastPhase {
			lastPhase = mo.Status.Phase
			boundaries = append(boundaries, op.writes.Load())
		}
	}})
	// A fallback unlike any original count: a resumed move that lost track
	// of a count and fell back would show in the controllers' replicas.
	mo := newMoveOperation(t, ops, "move", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: f.Namespaces,
		Controllers: movev1alpha1.ControllersSpec{FallbackReplicas: ptr.To[int32](3)},
	})

	// Wait until the operator crashed, or the move is done.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-op.done:
		default:
			if get(g, mo).Status.Phase != movev1alpha1.PhaseDone && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		break
	}
	result := crashResult{writes: op.writes.Load(), boundaries: boundaries}
	final := op
	if k > 0 {
		op.stop()
		phase := get(g, mo).Status.Phase
		t.Logf("crashed before write %d in phase %s; a fresh operator resumes", k, phase)
		final = startOperator(t, operatorOptions{})
	}
	waitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	after := inNamespaces(take(ctx, g, env.Target, f.Namespaces), f.Namespaces...)
	if diff := snapshot.Diff(before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	g.Expect(inNamespaces(take(ctx, g, env.Source, f.Namespaces), f.Namespaces...).Objects).To(BeEmpty(), "the source keeps nothing of the moved namespace")
	assertOwnersExist(ctx, g, env.Target.Client, f.Namespaces)
	g.Expect(stateOf(ctx, g)).To(Equal(stateBefore), "controllers and webhooks must be as before")
	assertNoMoveMarks(ctx, g, env.Target.Client, f.Namespaces)
	assertNoMoveMarks(ctx, g, env.Source.Client, f.Namespaces)

	// Remove the MoveOperation while an operator still runs to release it.
	deleteMoveOperation(t, mo)
	final.stop()
	return result
}
