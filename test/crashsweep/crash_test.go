//go:build cluster

package crashsweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// TestTheMoveFinishesAfterACrashAtAnyWrite stops the operator just before
// each of its writes to either cluster (status writes included), starts a
// fresh one, and checks the move still ends Done in the state an
// uninterrupted move reaches: the fleet in the target exactly, nothing left
// in the source but global objects, every controller and webhook as before,
// nothing paused. Every write of every phase is a crash point
// (see movetest.CrashSections: run j crashes before the j-th write of each section);
// each run gets a fleet of its own instead of new clusters. The move
// carries the status (spec.objectStatusPolicy Carry), so that the status writes are
// crash points too, and each copy must have its original's status.
func TestTheMoveFinishesAfterACrashAtAnyWrite(t *testing.T) {
	movetest.EnsureSetup(t)
	began := time.Now()
	sizes := runCrashPoint(t, 0, nil)
	runs := movetest.Longest(sizes)
	t.Logf("an uninterrupted move made %d writes in %d sections: %v; %d runs crash before each", movetest.TotalWrites(sizes), len(sizes), sizes, runs)
	movetest.SweepRuns(t, "move crash sweep", sizes, began, func(t *testing.T, j int64) { runCrashPoint(t, j, sizes) })
}

// runCrashPoint moves a fresh minimal fleet with operators that crash
// before the j-th write of every section (never, for j = 0), each resumed by a
// fresh one, checks the result and returns the writes of each section.
func runCrashPoint(t *testing.T, j int64, reference []movetest.SectionSize) []movetest.SectionSize {
	g := NewWithT(t)
	within := movetest.RunBound(reference)
	ctx, cancel := context.WithTimeout(context.Background(), within+time.Minute)
	defer cancel()
	name := fmt.Sprintf("crash%d-%s", j, rand.String(3))
	// Every shape (classic, ClusterClass, ClusterClass in another
	// namespace), each with a control plane, a MachineDeployment and a
	// MachinePool; no workers, which would only repeat kinds.
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	stateBefore := movetest.StateOf(ctx, g)
	before := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces), f.Namespaces...)
	statusesBefore := statusesIn(ctx, g, movetest.Env.Source, f.Namespaces)
	ops := movetest.OpsNamespace(t)

	sections := movetest.NewCrashSections(j, name, nil, reference)
	op := movetest.StartOperator(t, sections.Options())
	// A fallback unlike any original count: a resumed move that lost track
	// of a count and fell back would show in the controllers' replicas.
	mo := movetest.NewMoveOperation(t, ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: f.Namespaces,
		Controllers:        movev1alpha1.ControllersSpec{FallbackReplicas: ptr.To[int32](3)},
		ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	resumer := movetest.StartResumer(t, op, sections.Options())
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, within)
	sections.LogCrashes(t)

	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces), f.Namespaces...)
	if diff := snapshot.Diff(before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	g.Expect(statusesIn(ctx, g, movetest.Env.Target, f.Namespaces)).To(Equal(statusesBefore), "every copy has its original's status")
	g.Expect(movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces), f.Namespaces...).Objects).To(BeEmpty(), "the source keeps nothing of the moved namespace")
	movetest.AssertOwnersExist(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "controllers and webhooks must be as before")
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)

	// Remove the MoveOperation while an operator still runs to release it.
	movetest.DeleteMoveOperation(t, mo)
	resumer.Stop()
	return sections.Sizes()
}

// statusesIn returns the status of every object of a cluster in the
// namespaces, by object, without the generations they observed: a copy's
// are its own (a Cluster's pause and unpause bump its generation in both
// clusters; see move's mapGenerations, tested on its own).
func statusesIn(ctx context.Context, g Gomega, m *testenv.Management, namespaces []string) map[snapshot.Key]any {
	s, err := snapshot.Take(ctx, m.Client, snapshot.Options{Namespaces: namespaces, Status: true})
	g.Expect(err).NotTo(HaveOccurred())
	out := map[snapshot.Key]any{}
	for _, o := range movetest.InNamespaces(s, namespaces...).Objects {
		// An empty status is as good as none: there is nothing to carry.
		if status, ok := withoutObservedGenerations(o.Status).(map[string]any); ok && len(status) > 0 {
			out[o.Key()] = status
		}
	}
	return out
}

func withoutObservedGenerations(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			if k != "observedGeneration" {
				out[k] = withoutObservedGenerations(item)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = withoutObservedGenerations(item)
		}
		return out
	default:
		return v
	}
}
