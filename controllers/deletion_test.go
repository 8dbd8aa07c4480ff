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
	"github.com/move-operator/move-operator/test/snapshot"
)

// waitGone waits until the MoveOperation no longer exists.
func waitGone(t *testing.T, mo *movev1alpha1.MoveOperation) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(mo), &movev1alpha1.MoveOperation{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 100*time.Millisecond).Should(BeTrue(), "the MoveOperation must go once its move is settled")
}

func TestDeletingAMoveOperationBeforeThePointOfNoReturnRollsTheMoveBack(t *testing.T) {
	rc := newRollbackCase(t, "delbefore")
	ctx := context.Background()
	g := NewWithT(t)
	var mo *movev1alpha1.MoveOperation
	var once sync.Once
	startOperator(t, operatorOptions{onWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "target" && verb == "create" {
			once.Do(func() { _ = k8s.Delete(ctx, mo) }) // deleted while copying
		}
	}})
	mo = newMoveOperation(t, rc.ops, "deleted-early", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces})
	waitGone(t, mo)

	rc.assertAsBefore(ctx, g)
}

func TestDeletingAMoveOperationAfterThePointOfNoReturnLetsTheMoveFinish(t *testing.T) {
	rc := newRollbackCase(t, "delafter")
	ctx := context.Background()
	g := NewWithT(t)
	var mo *movev1alpha1.MoveOperation
	var once sync.Once
	startOperator(t, operatorOptions{onWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "source" && verb == "delete" {
			once.Do(func() { _ = k8s.Delete(ctx, mo) }) // deleted while deleting from the source
		}
	}})
	mo = newMoveOperation(t, rc.ops, "deleted-late", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces})
	waitGone(t, mo)

	after := inNamespaces(take(ctx, g, env.Target, rc.f.Namespaces), rc.f.Namespaces...)
	if diff := snapshot.Diff(rc.before, after); diff != "" {
		t.Fatalf("the move did not finish: the target differs from the source before it:\n%s", diff)
	}
	g.Expect(inNamespaces(take(ctx, g, env.Source, rc.f.Namespaces), rc.f.Namespaces...).Objects).To(BeEmpty())
	g.Expect(stateOf(ctx, g)).To(Equal(rc.stateBefore))
	assertNoMoveMarks(ctx, g, env.Target.Client, rc.f.Namespaces)
	assertNoMoveMarks(ctx, g, env.Source.Client, rc.f.Namespaces)
}

// Deleting the namespace of a MoveOperation in the middle of a move deletes
// the MoveOperation and its kubeconfig Secret with it: the Secret must stay
// until the rollback, which needs the target, is done, and then both go.
func TestDeletingTheNamespaceOfAMoveMidwayRollsBackAndLetsTheNamespaceGo(t *testing.T) {
	rc := newRollbackCase(t, "delns")
	ctx := context.Background()
	g := NewWithT(t)
	var once sync.Once
	var mo *movev1alpha1.MoveOperation
	startOperator(t, operatorOptions{onWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "target" && verb == "create" {
			once.Do(func() {
				// What the namespace controller does, in an order and at a
				// pace that leaves the rollback without its Secret unless
				// the move holds it: the Secret first, then the rest.
				_ = k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.ops, Name: "target"}})
				_ = k8s.Delete(ctx, mo)
				_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rc.ops}})
			})
		}
	}})
	mo = newMoveOperation(t, rc.ops, "ns-deleted", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces})
	waitGone(t, mo)
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: rc.ops, Name: "target"}, &corev1.Secret{}))).To(BeTrue(),
		"the Secret goes once the move no longer needs it")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: rc.ops}, &corev1.Namespace{}))
	}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the namespace goes once the move has rolled back")

	rc.assertAsBefore(ctx, g)
}
