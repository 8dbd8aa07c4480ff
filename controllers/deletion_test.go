//go:build cluster

package controllers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

// waitGone waits until the MoveOperation no longer exists.
func waitGone(t *testing.T, mo *movev1alpha1.MoveOperation) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		err := movetest.Client.Get(context.Background(), client.ObjectKeyFromObject(mo), &movev1alpha1.MoveOperation{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 100*time.Millisecond).Should(BeTrue(), "the MoveOperation must go once its move is settled")
}

func TestDeletingAMoveOperationBeforeThePointOfNoReturnRollsTheMoveBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "delbefore")
	ctx := context.Background()
	g := NewWithT(t)
	var mo *movev1alpha1.MoveOperation
	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "target" && verb == "create" {
			once.Do(func() { _ = movetest.Client.Delete(ctx, mo) }) // deleted while copying
		}
	}})
	mo = movetest.NewMoveOperation(t, rc.Ops, "deleted-early", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	waitGone(t, mo)

	rc.AssertAsBefore(ctx, g)
}

func TestDeletingAMoveOperationAfterThePointOfNoReturnLetsTheMoveFinish(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "delafter")
	ctx := context.Background()
	g := NewWithT(t)
	var mo *movev1alpha1.MoveOperation
	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "source" && verb == "delete" {
			once.Do(func() { _ = movetest.Client.Delete(ctx, mo) }) // deleted while deleting from the source
		}
	}})
	mo = movetest.NewMoveOperation(t, rc.Ops, "deleted-late", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	waitGone(t, mo)

	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the move did not finish: the target differs from the source before it:\n%s", diff)
	}
	g.Expect(movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, rc.Fleet.Namespaces), rc.Fleet.Namespaces...).Objects).To(BeEmpty())
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore))
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, rc.Fleet.Namespaces)
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, rc.Fleet.Namespaces)
}

// Deleting the namespace of a MoveOperation in the middle of a move deletes
// the MoveOperation and its kubeconfig Secret with it: the Secret must stay
// until the rollback, which needs the target, is done, and then both go.
func TestDeletingTheNamespaceOfAMoveMidwayRollsBackAndLetsTheNamespaceGo(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "delns")
	ctx := context.Background()
	g := NewWithT(t)
	var once sync.Once
	var mo *movev1alpha1.MoveOperation
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "target" && verb == "create" {
			once.Do(func() {
				// What the namespace controller does, in an order and at a
				// pace that leaves the rollback without its Secret unless
				// the move holds it: the Secret first, then the rest.
				_ = movetest.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Ops, Name: "target"}})
				_ = movetest.Client.Delete(ctx, mo)
				_ = movetest.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rc.Ops}})
			})
		}
	}})
	mo = movetest.NewMoveOperation(t, rc.Ops, "ns-deleted", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	waitGone(t, mo)
	g.Expect(apierrors.IsNotFound(movetest.Client.Get(ctx, client.ObjectKey{Namespace: rc.Ops, Name: "target"}, &corev1.Secret{}))).To(BeTrue(),
		"the Secret goes once the move no longer needs it")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(movetest.Client.Get(ctx, client.ObjectKey{Name: rc.Ops}, &corev1.Namespace{}))
	}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the namespace goes once the move has rolled back")

	rc.AssertAsBefore(ctx, g)
}
