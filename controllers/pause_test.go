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
)

// pauseAsUser pauses a Cluster as its user would (spec.paused), and the
// ClusterClass of a topology Cluster (the paused annotation, all a
// ClusterClass has); it returns the ClusterClass's name, "" for none. Both
// get pausedByUserLabel for assertNoMoveMarks.
func pauseAsUser(ctx context.Context, g Gomega, ns, cluster, classOf string) string {
	label := fmt.Sprintf(`"labels":{%q:""}`, pausedByUserLabel)
	g.Expect(env.Source.Client.Patch(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{`+label+`},"spec":{"paused":true}}`)))).To(Succeed())
	if classOf == "" {
		return ""
	}
	c := &clusterv1.Cluster{}
	g.Expect(env.Source.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: classOf}, c)).To(Succeed())
	class := c.Spec.Topology.ClassRef.Name
	g.Expect(class).NotTo(BeEmpty(), "Cluster %s has no ClusterClass", classOf)
	g.Expect(env.Source.Client.Patch(ctx, &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: class}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{%s,"annotations":{%q:""}}}`, label, clusterv1.PausedAnnotation))))).To(Succeed())
	return class
}

// TestWhatTheUserPausedMovesPausedAndStaysPaused: a Cluster and a
// ClusterClass paused by their user before the move are moved, paused, and
// are still paused in the target after Done, where the Cluster the operator
// paused itself is unpaused; the plan names them. clusterctl move unpauses
// every Cluster in the target.
func TestWhatTheUserPausedMovesPausedAndStaysPaused(t *testing.T) {
	ensureSetup(t)
	ctx := context.Background()
	g := NewWithT(t)
	name := "userpause-" + rand.String(4)
	f := createFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	classic, topology := f.Clusters[0], f.Clusters[1]
	g.Expect(classic.Shape).To(Equal(fleet.Classic))
	g.Expect(topology.Shape).To(Equal(fleet.ClusterClass))
	class := pauseAsUser(ctx, g, name, classic.Name, topology.Name)

	startOperator(t, operatorOptions{})
	mo := newMoveOperation(t, opsNamespace(t), "move", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: f.Namespaces})
	done, _ := waitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
	g.Expect(done.Status.Plan.Warnings).To(ContainElement(And(ContainSubstring(classic.Name), ContainSubstring(class), ContainSubstring("stay paused"))))

	moved := &clusterv1.Cluster{}
	g.Expect(env.Target.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: classic.Name}, moved)).To(Succeed())
	g.Expect(ptr.Deref(moved.Spec.Paused, false)).To(BeTrue(), "the Cluster its user paused is still paused in the target")
	g.Expect(moved.Annotations).NotTo(HaveKey(movev1alpha1.PausedByAnnotation))
	g.Expect(env.Target.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: topology.Name}, moved)).To(Succeed())
	g.Expect(ptr.Deref(moved.Spec.Paused, false)).To(BeFalse(), "the Cluster the operator paused is unpaused in the target")
	cc := &clusterv1.ClusterClass{}
	g.Expect(env.Target.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: class}, cc)).To(Succeed())
	g.Expect(cc.Annotations).To(HaveKey(clusterv1.PausedAnnotation), "the ClusterClass its user paused is still paused in the target")
	assertNoMoveMarks(ctx, g, env.Target.Client, f.Namespaces)
	deleteMoveOperation(t, mo)
}

// TestWhatTheUserPausedStaysPausedAfterARollback: a move that fails after
// it paused the Clusters gives the source back with the user's pause where
// it was, and only the operator's own pauses undone.
func TestWhatTheUserPausedStaysPausedAfterARollback(t *testing.T) {
	rc := newRollbackCase(t, "userpause-rb")
	ctx := context.Background()
	g := NewWithT(t)
	ns := rc.f.Namespaces[0]
	pauseAsUser(ctx, g, ns, rc.f.Clusters[0].Name, "")
	rc.before = inNamespaces(take(ctx, g, env.Source, rc.f.Namespaces), rc.f.Namespaces...)

	// The target refuses every create: Copying fails at once, and rolls back.
	startOperator(t, operatorOptions{failIf: func(cluster, verb string, _ client.Object) error {
		if cluster == "target" && verb == "create" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "", errors.New("fault injected by the test"))
		}
		return nil
	}})
	mo := newMoveOperation(t, rc.ops, "move", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: rc.f.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
	})
	rc.assertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	c := &clusterv1.Cluster{}
	g.Expect(env.Source.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rc.f.Clusters[0].Name}, c)).To(Succeed())
	g.Expect(ptr.Deref(c.Spec.Paused, false)).To(BeTrue(), "the Cluster its user paused is still paused in the source")
	deleteMoveOperation(t, mo)
}
