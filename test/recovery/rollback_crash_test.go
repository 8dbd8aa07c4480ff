//go:build cluster

package recovery_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/movetest"
)

// TestARollbackFinishesAfterACrashAtAnyWrite makes a move fail part-way
// through Copying (the target refuses every create from the
// movetest.FailCopyAfter-th write of Copying on, and the copy timeout is tiny, so the
// move gives up at the first refusal), stops the operator during the
// rollback, and resumes with a fresh operator without the fault. Every run
// must end Failed, with the copy timeout as its reason and
// both clusters as they were before the move: the source's objects
// unpaused, nothing of the move left in the target, every
// controller and webhook as before.
//
// Every write of each of the rollback's steps is a crash point (see
// movetest.CrashSections: run j crashes before the j-th write of each section).
func TestARollbackFinishesAfterACrashAtAnyWrite(t *testing.T) {
	movetest.EnsureSetup(t)
	began := time.Now()
	sizes := runRollbackCrashPoint(t, 0, nil)
	runs := movetest.Longest(sizes)
	t.Logf("an uninterrupted rollback made %d writes in %d sections: %v; %d runs crash before each", movetest.TotalWrites(sizes), len(sizes), sizes, runs)
	movetest.SweepRuns(t, "rollback crash sweep", sizes, began, func(t *testing.T, j int64) { runRollbackCrashPoint(t, j, sizes) })
}

// runRollbackCrashPoint fails a move of a fresh minimal fleet during
// Copying with an operator that, once the rollback has begun, crashes
// before the j-th write of each of its sections (never, for j = 0), each crash
// resumed by a fresh operator without the fault; it checks both clusters
// and returns the writes of each step of the rollback.
func runRollbackCrashPoint(t *testing.T, j int64, reference []movetest.SectionSize) []movetest.SectionSize {
	rc := movetest.NewRollbackCase(t, fmt.Sprintf("rbcrash%d-", j))
	g := NewWithT(t)

	sections := movetest.NewCrashSections(j, rc.Fleet.Namespaces[0], func(section string) bool {
		return strings.HasPrefix(section, string(movev1alpha1.PhaseRollingBack))
	}, reference)
	var (
		copyingAt atomic.Int64
		op        *movetest.Operator
	)
	faulty := sections.Options()
	faulty.FailIf = func(cluster, verb string, _ client.Object) error {
		at := copyingAt.Load()
		if cluster == "target" && verb == "create" && at > 0 && op.Writes.Load() > at+movetest.FailCopyAfter {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "", errors.New("fault injected by the test"))
		}
		return nil
	}
	faulty.OnWrite = func(cluster, verb string, obj client.Object) {
		sections.Observe(cluster, verb, obj)
		if mo, ok := obj.(*movev1alpha1.MoveOperation); ok && verb == "patch/status" && mo.Status.Phase == movev1alpha1.PhaseCopying {
			copyingAt.CompareAndSwap(0, op.Writes.Load())
		}
	}
	op = movetest.StartOperator(t, faulty)
	mo := movetest.NewMoveOperation(t, rc.Ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
		// Copies with their status are deleted as those without.
		ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	resumer := movetest.StartResumer(t, op, sections.Options())
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, movetest.RunBound(reference))
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	sections.LogCrashes(t)
	g.Expect(sections.Sizes()).NotTo(BeEmpty(), "the injected fault must make the move roll back")
	g.Expect(movetest.Get(g, mo).Status.FailureMessage).To(ContainSubstring("fault injected by the test"))

	// Remove the MoveOperation while an operator still runs to release it.
	movetest.DeleteMoveOperation(t, mo)
	resumer.Stop()
	return sections.Sizes()
}
