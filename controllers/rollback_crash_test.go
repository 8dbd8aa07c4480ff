package controllers_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// failCopyAfter is the write of Copying after which the target refuses
// every create: part of the fleet is in the target when the move fails, so
// the rollback has real work in both clusters.
const failCopyAfter = 20

// rollbackCrashStride is the stride of the subset CI runs.
const rollbackCrashStride = 10

// TestARollbackFinishesAfterACrashAtAnyWrite makes a move fail part-way
// through Copying (the target refuses every create from the
// failCopyAfter-th write of Copying on, and the copy timeout is tiny, so the
// move gives up at the first refusal), stops the operator just before the
// j-th write of its rollback, and starts a fresh operator without the
// fault. Every run must end Failed, with the copy timeout as its reason and
// both clusters as they were before the move: the source's objects
// unlabelled and unpaused, nothing of the move left in the target, every
// controller and webhook as before.
//
// Crash points count from the write that entered RollingBack, so that they
// name the same step of the rollback in every run, however many creates
// were refused before the move gave up (requests in flight finish in any
// order).
func TestARollbackFinishesAfterACrashAtAnyWrite(t *testing.T) {
	ensureSetup(t)
	began := time.Now()
	reference := runRollbackCrashPoint(t, 0)
	t.Logf("an uninterrupted rollback made %d writes; phase boundaries at rollback writes %v", reference.writes, reference.boundaries)

	var points []int64
	if os.Getenv(crashSweepEnv) == "full" {
		from, _ := strconv.ParseInt(os.Getenv(crashFromEnv), 10, 64)
		for j := max(from, 1); j <= reference.writes; j++ {
			points = append(points, j)
		}
	} else {
		points = subset(reference.writes, reference.boundaries, rollbackCrashStride)
	}
	failed := 0
	for _, j := range points {
		if !t.Run(fmt.Sprintf("a crash before rollback write %d", j), func(t *testing.T) { runRollbackCrashPoint(t, j) }) {
			failed++
		}
	}
	t.Logf("rollback crash sweep: %d crash points out of %d rollback writes, %d failed, in %s", len(points), reference.writes, failed, time.Since(began).Round(time.Second))
}

// runRollbackCrashPoint fails a move of a fresh minimal fleet during
// Copying with an operator that crashes before the j-th write of the
// rollback (never, for j = 0), finishes the rollback with a fresh operator
// and checks both clusters. It returns the rollback's writes, counted from
// the one that entered RollingBack.
func runRollbackCrashPoint(t *testing.T, j int64) crashResult {
	rc := newRollbackCase(t, fmt.Sprintf("rbcrash%d-", j))
	g := NewWithT(t)

	var (
		copyingAt, rollingBackAt atomic.Int64
		mu                       sync.Mutex
		lastPhase                movev1alpha1.MovePhase
		boundaries               []int64
		op                       *operator
	)
	op = startOperator(t, operatorOptions{
		failIf: func(cluster, verb string, _ client.Object) error {
			at := copyingAt.Load()
			if cluster == "target" && verb == "create" && at > 0 && op.writes.Load() > at+failCopyAfter {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "", errors.New("fault injected by the test"))
			}
			return nil
		},
		crashIf: func(n int64) bool {
			at := rollingBackAt.Load()
			return j > 0 && at > 0 && n == at+j
		},
		onWrite: func(_, verb string, obj client.Object) {
			mo, ok := obj.(*movev1alpha1.MoveOperation)
			if !ok || verb != "patch/status" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if mo.Status.Phase == lastPhase {
				return
			}
			lastPhase = mo.Status.Phase
			n := op.writes.Load()
			switch mo.Status.Phase {
			case movev1alpha1.PhaseCopying:
				copyingAt.Store(n)
			case movev1alpha1.PhaseRollingBack:
				rollingBackAt.Store(n)
			}
			if at := rollingBackAt.Load(); at > 0 {
				boundaries = append(boundaries, n-at)
			}
		},
	})
	mo := newMoveOperation(t, rc.ops, "move", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: rc.f.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
	})

	// Wait until the operator crashed, or the rollback is done.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-op.done:
		default:
			if get(g, mo).Status.Phase != movev1alpha1.PhaseFailed && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		break
	}
	g.Expect(rollingBackAt.Load()).To(BeNumerically(">", 0), "the injected fault must make the move roll back")
	result := crashResult{writes: op.writes.Load() - rollingBackAt.Load(), boundaries: boundaries}
	final := op
	if j > 0 {
		op.stop()
		t.Logf("crashed before rollback write %d in phase %s; a fresh operator resumes", j, get(g, mo).Status.Phase)
		final = startOperator(t, operatorOptions{})
	}
	rc.assertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	g.Expect(get(g, mo).Status.FailureMessage).To(ContainSubstring("fault injected by the test"))

	// Remove the MoveOperation while an operator still runs to release it.
	deleteMoveOperation(t, mo)
	final.stop()
	return result
}
