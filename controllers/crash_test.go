package controllers_test

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
	"github.com/move-operator/move-operator/test/snapshot"
)

// TestTheMoveFinishesAfterACrashAtAnyWrite stops the operator just before
// each of its writes to either cluster (status writes included), starts a
// fresh one, and checks the move still ends Done in the state an
// uninterrupted move reaches: the fleet in the target exactly, nothing left
// in the source but global objects, every controller and webhook as before,
// nothing paused. Every write of every phase is a crash point
// (see crashSections: run j crashes before the j-th write of each section);
// each run gets a fleet of its own instead of new clusters.
func TestTheMoveFinishesAfterACrashAtAnyWrite(t *testing.T) {
	ensureSetup(t)
	began := time.Now()
	sizes := runCrashPoint(t, 0, nil)
	runs := longest(sizes)
	t.Logf("an uninterrupted move made %d writes in %d sections: %v; %d runs crash before each", totalWrites(sizes), len(sizes), sizes, runs)
	sweepRuns(t, "move crash sweep", sizes, began, func(t *testing.T, j int64) { runCrashPoint(t, j, sizes) })
}

// runCrashPoint moves a fresh minimal fleet with operators that crash
// before the j-th write of every section (never, for j = 0), each resumed by a
// fresh one, checks the result and returns the writes of each section.
func runCrashPoint(t *testing.T, j int64, reference []sectionSize) []sectionSize {
	g := NewWithT(t)
	within := runBound(reference)
	ctx, cancel := context.WithTimeout(context.Background(), within+time.Minute)
	defer cancel()
	name := fmt.Sprintf("crash%d-%s", j, rand.String(3))
	// Every shape (classic, ClusterClass, ClusterClass in another
	// namespace), each with a control plane, a MachineDeployment and a
	// MachinePool; no workers, which would only repeat kinds.
	f := createFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	stateBefore := stateOf(ctx, g)
	before := inNamespaces(take(ctx, g, env.Source, f.Namespaces), f.Namespaces...)
	ops := opsNamespace(t)

	sections := newCrashSections(j, name, nil, reference)
	op := startOperator(t, sections.options())
	// A fallback unlike any original count: a resumed move that lost track
	// of a count and fell back would show in the controllers' replicas.
	mo := newMoveOperation(t, ops, "move", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: f.Namespaces,
		Controllers: movev1alpha1.ControllersSpec{FallbackReplicas: ptr.To[int32](3)},
	})
	resumer := startResumer(t, op, sections.options())
	waitForPhase(t, mo, movev1alpha1.PhaseDone, within)
	sections.logCrashes(t)

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
	resumer.stop()
	return sections.sizes()
}
