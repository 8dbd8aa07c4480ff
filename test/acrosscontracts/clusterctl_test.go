//go:build cluster

package acrosscontracts_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// clusterctlRefusal is how clusterctl v1.14.2 refuses a management cluster
// whose Cluster CRD is stored at another version than its contract's
// (CheckCAPIContract in cmd/clusterctl/client/cluster/inventory.go, called
// for both clusters before a move reads anything).
const clusterctlRefusal = `this version of clusterctl could be used only with "v1beta2" management clusters, "v1beta1" detected`

// TestClusterctlV114RefusesTheV110FleetThatTheOperatorMoves is the upgrade's
// side by side: one Cluster API v1.10 fleet (v1beta1, as in
// TestAClusterAPIV110FleetMovesIntoV114ConvertedByTheOperatorWhileTheTargetsWebhooksAreStopped)
// in the source, a v1.14 target. clusterctl v1.14.2's own move, through its
// library as `clusterctl move --namespace` runs it, refuses the source
// before it reads or writes anything: the source is untouched (no Cluster
// paused) and the target holds none of the fleet. The operator then moves
// the same fleet, and the move ends Done.
func TestClusterctlV114RefusesTheV110FleetThatTheOperatorMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	olderClusterAPIInSource(t)
	source, target := clients(t)
	ns := testenv.NewNamespace(t, movetest.Env.Source, "side-by-side")
	before := createOlderFleet(t, ctx, source, ns)
	t.Cleanup(func() { removeFleet(t, ns, before) })

	cc, err := mover.NewClusterctl(ctx, movetest.Env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, clusterctlErr := cc.Move(ctx, nil, []string{ns})

	t.Run("clusterctl v1.14.2 refuses the v1beta1 source", func(t *testing.T) {
		NewWithT(t).Expect(clusterctlErr).To(MatchError(ContainSubstring(clusterctlRefusal)), "clusterctl move --namespace %s", ns)
	})

	t.Run("clusterctl left the source's fleet as it was, no Cluster paused", func(t *testing.T) {
		g := NewWithT(t)
		for _, key := range sortedKeys(before) {
			src := before[key]
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(src.GroupVersionKind())
			g.Expect(source.Get(ctx, client.ObjectKeyFromObject(src), got)).To(Succeed(), "%s is still in the source", key)
			g.Expect(got.GetResourceVersion()).To(Equal(src.GetResourceVersion()), "%s was written to", key)
			if got.GetKind() == "Cluster" {
				paused, _, _ := unstructured.NestedBool(got.Object, "spec", "paused")
				g.Expect(paused).To(BeFalse(), "%s has spec.paused", key)
				g.Expect(got.GetAnnotations()).NotTo(HaveKey("cluster.x-k8s.io/paused"), "%s", key)
			}
		}
	})

	t.Run("clusterctl wrote none of the fleet to the target", func(t *testing.T) {
		g := NewWithT(t)
		for _, key := range sortedKeys(before) {
			src := before[key]
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(targetGVK(t, ctx, target, src.GroupVersionKind()))
			err := target.Get(ctx, client.ObjectKeyFromObject(src), got)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s is in the target: %v", key, err)
		}
		err := target.Get(ctx, client.ObjectKey{Name: ns}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the namespace %s is in the target: %v", ns, err)
	})

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "side-by-side", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: []string{ns}, ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)
	NewWithT(t).Expect(movetest.KstatusOf(NewWithT(t), done)).To(Equal(status.CurrentStatus))

	t.Run("the operator moved the same fleet into the target", func(t *testing.T) {
		g := NewWithT(t)
		for _, key := range sortedKeys(before) {
			src := before[key]
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(targetGVK(t, ctx, target, src.GroupVersionKind()))
			g.Expect(target.Get(ctx, client.ObjectKeyFromObject(src), got)).To(Succeed(), "%s is in the target at %s", key, got.GroupVersionKind().Version)
		}
	})

	t.Logf("clusterctl v1.14.2: refused: %v", clusterctlErr)
	t.Logf("the operator: MoveOperation %s/%s %s, the %d objects of the same fleet in the target", mo.Namespace, mo.Name, done.Status.Phase, len(before))
}
