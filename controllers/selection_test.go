//go:build cluster

package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

func TestAMoveOfOneNamespaceLeavesTheOthersAlone(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	prefix := "one" + rand.String(4)
	moved, kept := prefix+"-a", prefix+"-b"
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(1), Namespaces: []string{moved, kept}, Name: prefix})

	stateBefore := movetest.StateOf(ctx, g)
	movedBefore := movetest.Take(ctx, g, movetest.Env.Source, []string{moved})
	keptBefore := movetest.Take(ctx, g, movetest.Env.Source, []string{kept})

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "move-one", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: []string{moved},
	})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	targetAfter := movetest.Take(ctx, g, movetest.Env.Target, []string{moved})
	if diff := snapshot.Diff(movetest.InNamespaces(movedBefore, moved), movetest.InNamespaces(targetAfter, moved)); diff != "" {
		t.Fatalf("namespace %s in the target differs from the source before the move:\n%s", moved, diff)
	}
	if diff := snapshot.Diff(movetest.InNamespaces(keptBefore, kept), movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, []string{kept}), kept)); diff != "" {
		t.Fatalf("namespace %s, not moved, changed in the source:\n%s", kept, diff)
	}
	g.Expect(movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, []string{kept}), kept).Objects).To(BeEmpty(), "nothing of %s may reach the target", kept)
	for _, o := range movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, []string{moved}), moved).Objects {
		t.Errorf("%s is still in the source after its namespace moved", o.Key())
	}
	movetest.AssertOwnersExist(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore))
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
}

func TestAClusterSelectorMovesExactlyTheSelectedClusters(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	prefix := "sel" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})

	// Select the classic cluster only.
	var chosen fleet.WorkloadCluster
	for _, wc := range f.Clusters {
		if wc.Shape == fleet.Classic {
			chosen = wc
		}
	}
	c := movetest.Env.Source.Client
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: chosen.Namespace, Name: chosen.Name}, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Labels["move"] = "yes"
	g.Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
	stateBefore := movetest.StateOf(ctx, g)
	before := movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "move-selected", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: f.Namespaces,
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"move": "yes"}},
	})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	belongsToChosen := func(o snapshot.Object) bool {
		return o.Labels[clusterv1.ClusterNameLabel] == chosen.Name || (o.Kind == "Cluster.cluster.x-k8s.io" && o.Name == chosen.Name)
	}
	target := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces), f.Namespaces...)
	source := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces), f.Namespaces...)
	var clustersInTarget []string
	for _, o := range target.Objects {
		if o.Kind == "Cluster.cluster.x-k8s.io" {
			clustersInTarget = append(clustersInTarget, o.Name)
		}
		if o.Labels[clusterv1.ClusterNameLabel] != "" {
			g.Expect(belongsToChosen(o)).To(BeTrue(), "%s belongs to another cluster but reached the target", o.Key())
		}
		want, ok := before.Get(o.Key())
		g.Expect(ok).To(BeTrue(), "%s is in the target but was not in the source", o.Key())
		if diff := snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{want}}, &snapshot.Snapshot{Objects: []snapshot.Object{o}}); diff != "" {
			t.Errorf("%s differs from the source:\n%s", o.Key(), diff)
		}
	}
	g.Expect(clustersInTarget).To(ConsistOf(chosen.Name))
	for _, o := range before.Objects {
		if o.Namespace == "" || !belongsToChosen(o) {
			continue
		}
		_, left := source.Get(o.Key())
		g.Expect(left).To(BeFalse(), "%s of the selected cluster is still in the source", o.Key())
	}
	for _, wc := range f.Clusters {
		if wc.Name == chosen.Name {
			continue
		}
		_, ok := source.Get(snapshot.Key{Kind: "Cluster.cluster.x-k8s.io", Namespace: wc.Namespace, Name: wc.Name})
		g.Expect(ok).To(BeTrue(), "cluster %s was not selected and must stay", wc.Name)
	}
	movetest.AssertOwnersExist(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore))
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
}

func TestADryRunReportsThePlanAndWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	prefix := "dry" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	ops := movetest.OpsNamespace(t)
	sourceBefore := movetest.ResourceVersions(ctx, g, movetest.Env.Source, f.Namespaces)
	targetBefore := movetest.ResourceVersions(ctx, g, movetest.Env.Target, f.Namespaces)
	snapBefore := movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, ops, "dry-run", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: f.Namespaces, DryRun: true,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 2*time.Minute)

	g.Expect(done.Status.Plan).NotTo(BeNil())
	g.Expect(int(done.Status.Plan.Objects)).To(BeNumerically(">=", len(movetest.InNamespaces(snapBefore, f.Namespaces...).Objects)-2),
		"the plan counts the fleet's objects")
	g.Expect(done.Status.Plan.Kinds).To(ContainElement(movev1alpha1.KindCount{Kind: "Cluster.cluster.x-k8s.io", Count: 2}))
	g.Expect(done.Status.Plan.Groups).To(BeNumerically(">", 1))
	ready := meta.FindStatusCondition(done.Status.Conditions, movev1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(movev1alpha1.ReasonDryRun))
	g.Expect(movetest.KstatusOf(g, done)).To(Equal(status.CurrentStatus))
	g.Expect(done.Status.Controllers).To(BeEmpty())

	g.Expect(movetest.ResourceVersions(ctx, g, movetest.Env.Source, f.Namespaces)).To(Equal(sourceBefore), "a dry run writes nothing to the source")
	g.Expect(movetest.ResourceVersions(ctx, g, movetest.Env.Target, f.Namespaces)).To(Equal(targetBefore), "a dry run writes nothing to the target")
}
