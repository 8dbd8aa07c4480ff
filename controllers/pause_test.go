//go:build cluster

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
)

// pauseAsUser pauses a Cluster as its user would (spec.paused), and the
// ClusterClass of a topology Cluster (the paused annotation, all a
// ClusterClass has); it returns the ClusterClass's name, "" for none. Both
// get movetest.PausedByUserLabel for movetest.AssertNoMoveMarks.
func pauseAsUser(ctx context.Context, g Gomega, ns, cluster, classOf string) string {
	label := fmt.Sprintf(`"labels":{%q:""}`, movetest.PausedByUserLabel)
	g.Expect(movetest.Env.Source.Client.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{`+label+`},"spec":{"paused":true}}`)))).To(Succeed())
	if classOf == "" {
		return ""
	}
	c := &clusterv1.Cluster{}
	g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: classOf}, c)).To(Succeed())
	class := c.Spec.Topology.ClassRef.Name
	g.Expect(class).NotTo(BeEmpty(), "Cluster %s has no ClusterClass", classOf)
	g.Expect(movetest.Env.Source.Client.Patch(ctx, &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: class}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{%s,"annotations":{%q:""}}}`, label, clusterv1.PausedAnnotation))))).To(Succeed())
	return class
}

// TestWhatTheUserPausedMovesPausedAndStaysPaused: a Cluster and a
// ClusterClass paused by their user before the move are moved, paused, and
// are still paused in the target after Done, where the Cluster the operator
// paused itself is unpaused; the plan names them. clusterctl move unpauses
// every Cluster in the target.
func TestWhatTheUserPausedMovesPausedAndStaysPaused(t *testing.T) {
	movetest.EnsureSetup(t)
	ctx := context.Background()
	g := NewWithT(t)
	name := "userpause-" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	classic, topology := f.Clusters[0], f.Clusters[1]
	g.Expect(classic.Shape).To(Equal(fleet.Classic))
	g.Expect(topology.Shape).To(Equal(fleet.ClusterClass))
	class := pauseAsUser(ctx, g, name, classic.Name, topology.Name)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "move", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: f.Namespaces})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
	g.Expect(done.Status.Plan.Warnings).To(ContainElement(And(ContainSubstring(classic.Name), ContainSubstring(class), ContainSubstring("stay paused"))))

	moved := &clusterv1.Cluster{}
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: classic.Name}, moved)).To(Succeed())
	g.Expect(ptr.Deref(moved.Spec.Paused, false)).To(BeTrue(), "the Cluster its user paused is still paused in the target")
	g.Expect(moved.Annotations).NotTo(HaveKey(movev1alpha1.PausedByAnnotation))
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: topology.Name}, moved)).To(Succeed())
	g.Expect(ptr.Deref(moved.Spec.Paused, false)).To(BeFalse(), "the Cluster the operator paused is unpaused in the target")
	cc := &clusterv1.ClusterClass{}
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: class}, cc)).To(Succeed())
	g.Expect(cc.Annotations).To(HaveKey(clusterv1.PausedAnnotation), "the ClusterClass its user paused is still paused in the target")
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	movetest.DeleteMoveOperation(t, mo)
}

// TestWhatTheUserPausedStaysPausedAfterARollback: a move that fails after
// it paused the Clusters gives the source back with the user's pause where
// it was, and only the operator's own pauses undone.
func TestWhatTheUserPausedStaysPausedAfterARollback(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "userpause-rb")
	ctx := context.Background()
	g := NewWithT(t)
	ns := rc.Fleet.Namespaces[0]
	pauseAsUser(ctx, g, ns, rc.Fleet.Clusters[0].Name, "")
	rc.Before = movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)

	// The target refuses every create: Copying fails at once, and rolls back.
	movetest.StartOperator(t, movetest.OperatorOptions{FailIf: func(cluster, verb string, _ client.Object) error {
		if cluster == "target" && verb == "create" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "", errors.New("fault injected by the test"))
		}
		return nil
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
	})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	c := &clusterv1.Cluster{}
	g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rc.Fleet.Clusters[0].Name}, c)).To(Succeed())
	g.Expect(ptr.Deref(c.Spec.Paused, false)).To(BeTrue(), "the Cluster its user paused is still paused in the source")
	movetest.DeleteMoveOperation(t, mo)
}
