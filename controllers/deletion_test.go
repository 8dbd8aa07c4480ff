package controllers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	after := inNamespaces(take(ctx, g, env.Source, rc.f.Namespaces), rc.f.Namespaces...)
	if diff := snapshot.Diff(rc.before, after); diff != "" {
		t.Fatalf("the source is not as it was before the move:\n%s", diff)
	}
	g.Expect(inNamespaces(take(ctx, g, env.Target, rc.f.Namespaces), rc.f.Namespaces...).Objects).To(BeEmpty())
	g.Expect(stateOf(ctx, g)).To(Equal(rc.stateBefore))
	assertNoMoveMarks(ctx, g, env.Source.Client, rc.f.Namespaces)
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
