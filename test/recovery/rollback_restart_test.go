//go:build cluster

package recovery_test

import (
	"errors"
	"fmt"
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
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

// TestARollbackAfterARestartDeletesChildrenBeforeOwners: an operator that
// restarts in RollingBack has no plan in memory; it must still delete the
// move's copies from the target children first, owners last, as the plan's
// groups order them, with no deletion refused or retried for its order.
// The move fails part-way through Copying, the operator crashes at the
// rollback's first write, and a fresh one (deleting one object at a time,
// so that the order is the one it chose) finishes the rollback.
func TestARollbackAfterARestartDeletesChildrenBeforeOwners(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "rbrestart")
	g := NewWithT(t)

	var (
		copyingAt   atomic.Int64
		rollingBack atomic.Bool
		first       *movetest.Operator
	)
	first = movetest.StartOperator(t, movetest.OperatorOptions{
		FailIf: func(cluster, verb string, _ client.Object) error {
			at := copyingAt.Load()
			if cluster == "target" && verb == "create" && at > 0 && first.Writes.Load() > at+movetest.FailCopyAfter {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "", errors.New("fault injected by the test"))
			}
			return nil
		},
		CrashIf: func(movetest.PendingWrite) bool { return rollingBack.Load() },
		OnWrite: func(_, verb string, obj client.Object) {
			mo, ok := obj.(*movev1alpha1.MoveOperation)
			if !ok || verb != "patch/status" {
				return
			}
			switch mo.Status.Phase {
			case movev1alpha1.PhaseCopying:
				copyingAt.CompareAndSwap(0, first.Writes.Load())
			case movev1alpha1.PhaseRollingBack:
				rollingBack.Store(true)
			}
		},
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
	})
	g.Eventually(first.Crashed.Load, 3*time.Minute, 50*time.Millisecond).Should(BeTrue(), "the move must fail and the operator crash in RollingBack")
	first.Stop()
	g.Expect(movetest.Get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack))

	var (
		mu       sync.Mutex
		deleted  []snapshot.Key
		refusals []string
	)
	movetest.StartOperator(t, movetest.OperatorOptions{
		Move: move.Options{Concurrency: 1},
		OnWrite: func(cluster, verb string, obj client.Object) {
			if cluster == "target" && verb == "delete" {
				mu.Lock()
				defer mu.Unlock()
				deleted = append(deleted, keyOf(obj))
			}
		},
		OnWriteError: func(cluster, verb string, obj client.Object, err error) {
			if cluster == "target" {
				mu.Lock()
				defer mu.Unlock()
				refusals = append(refusals, fmt.Sprintf("%s %s: %v", verb, keyOf(obj), err))
			}
		},
	})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)

	mu.Lock()
	defer mu.Unlock()
	g.Expect(refusals).To(BeEmpty(), "no deletion in the target is refused or retried")
	g.Expect(len(deleted)).To(BeNumerically(">", movetest.FailCopyAfter/2), "the rollback deletes the copies made before the fault")
	at := map[snapshot.Key]int{}
	for i, k := range deleted {
		at[k] = i
	}
	// The target's copies have the source's owners: the source snapshot
	// says who owns what.
	for _, o := range rc.Before.Objects {
		i, ok := at[o.Key()]
		if !ok {
			continue
		}
		for _, owner := range o.Owners {
			if j, ok := at[snapshot.Key{Kind: owner.Kind, Namespace: o.Namespace, Name: owner.Name}]; ok {
				g.Expect(j).To(BeNumerically(">", i), "%s deleted before %s, which it owns", owner.Kind+" "+owner.Name, o.Key())
			}
		}
	}
	movetest.DeleteMoveOperation(t, mo)
}

// keyOf names an object as a snapshot does.
func keyOf(obj client.Object) snapshot.Key {
	gvk := obj.GetObjectKind().GroupVersionKind()
	kind := gvk.Kind
	if kind == "" {
		kind = movetest.KindOf(obj)
	}
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return snapshot.Key{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
