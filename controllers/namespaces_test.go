//go:build cluster

package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// A namespace a move names is part of what moves even when nothing in it
// does (a pivot whose ClusterClass namespace holds nothing yet): the
// target has it afterwards, so that the way back with the same
// spec.namespaces does not fail NamespaceNotFound there.
func TestANamedNamespaceThatHoldsNothingIsCreatedInTheTarget(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	prefix := "emptyns" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	empty := testenv.NewNamespace(t, movetest.Env.Source, prefix+"-empty")
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: empty}, &corev1.Namespace{})).NotTo(Succeed(), "the target has no namespace %s before the move", empty)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	namespaces := append([]string{empty}, f.Namespaces...)
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "move-with-an-empty-namespace", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: namespaces,
	})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	for _, ns := range namespaces {
		g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed(),
			"namespace %s, named by the move, must be in the target for the way back", ns)
	}
	t.Cleanup(func() {
		_ = movetest.Env.Target.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: empty}})
	})
}
