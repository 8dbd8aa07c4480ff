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
	"github.com/move-operator/move-operator/test/snapshot"
)

func TestAMoveOfOneNamespaceLeavesTheOthersAlone(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ensureSetup(t)
	prefix := "one" + rand.String(4)
	moved, kept := prefix+"-a", prefix+"-b"
	f := createFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(1), Namespaces: []string{moved, kept}, Name: prefix})

	stateBefore := stateOf(ctx, g)
	movedBefore := take(ctx, g, env.Source, []string{moved})
	keptBefore := take(ctx, g, env.Source, []string{kept})

	startOperator(t, operatorOptions{})
	mo := newMoveOperation(t, opsNamespace(t), "move-one", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: []string{moved},
	})
	waitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	targetAfter := take(ctx, g, env.Target, []string{moved})
	if diff := snapshot.Diff(inNamespaces(movedBefore, moved), inNamespaces(targetAfter, moved)); diff != "" {
		t.Fatalf("namespace %s in the target differs from the source before the move:\n%s", moved, diff)
	}
	if diff := snapshot.Diff(inNamespaces(keptBefore, kept), inNamespaces(take(ctx, g, env.Source, []string{kept}), kept)); diff != "" {
		t.Fatalf("namespace %s, not moved, changed in the source:\n%s", kept, diff)
	}
	g.Expect(inNamespaces(take(ctx, g, env.Target, []string{kept}), kept).Objects).To(BeEmpty(), "nothing of %s may reach the target", kept)
	for _, o := range inNamespaces(take(ctx, g, env.Source, []string{moved}), moved).Objects {
		t.Errorf("%s is still in the source after its namespace moved", o.Key())
	}
	assertOwnersExist(ctx, g, env.Target.Client, f.Namespaces)
	g.Expect(stateOf(ctx, g)).To(Equal(stateBefore))
	assertNoMoveMarks(ctx, g, env.Target.Client, f.Namespaces)
	assertNoMoveMarks(ctx, g, env.Source.Client, f.Namespaces)
}

func TestAClusterSelectorMovesExactlyTheSelectedClusters(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ensureSetup(t)
	prefix := "sel" + rand.String(4)
	f := createFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})

	// Select the classic cluster only.
	var chosen fleet.WorkloadCluster
	for _, wc := range f.Clusters {
		if wc.Shape == fleet.Classic {
			chosen = wc
		}
	}
	c := env.Source.Client
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: chosen.Namespace, Name: chosen.Name}, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Labels["move"] = "yes"
	g.Expect(c.Patch(ctx, cluster, patch)).To(Succeed())
	stateBefore := stateOf(ctx, g)
	before := take(ctx, g, env.Source, f.Namespaces)

	startOperator(t, operatorOptions{})
	mo := newMoveOperation(t, opsNamespace(t), "move-selected", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: f.Namespaces,
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"move": "yes"}},
	})
	waitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	belongsToChosen := func(o snapshot.Object) bool {
		return o.Labels[clusterv1.ClusterNameLabel] == chosen.Name || (o.Kind == "Cluster.cluster.x-k8s.io" && o.Name == chosen.Name)
	}
	target := inNamespaces(take(ctx, g, env.Target, f.Namespaces), f.Namespaces...)
	source := inNamespaces(take(ctx, g, env.Source, f.Namespaces), f.Namespaces...)
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
	assertOwnersExist(ctx, g, env.Target.Client, f.Namespaces)
	g.Expect(stateOf(ctx, g)).To(Equal(stateBefore))
	assertNoMoveMarks(ctx, g, env.Target.Client, f.Namespaces)
	assertNoMoveMarks(ctx, g, env.Source.Client, f.Namespaces)
}

func TestADryRunReportsThePlanAndWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureSetup(t)
	prefix := "dry" + rand.String(4)
	f := createFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	ops := opsNamespace(t)
	sourceBefore := resourceVersions(ctx, g, env.Source, f.Namespaces)
	targetBefore := resourceVersions(ctx, g, env.Target, f.Namespaces)
	snapBefore := take(ctx, g, env.Source, f.Namespaces)

	startOperator(t, operatorOptions{})
	mo := newMoveOperation(t, ops, "dry-run", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: f.Namespaces, DryRun: true,
	})
	done, _ := waitForPhase(t, mo, movev1alpha1.PhaseDone, 2*time.Minute)

	g.Expect(done.Status.Plan).NotTo(BeNil())
	g.Expect(int(done.Status.Plan.Objects)).To(BeNumerically(">=", len(inNamespaces(snapBefore, f.Namespaces...).Objects)-2),
		"the plan counts the fleet's objects")
	g.Expect(done.Status.Plan.Kinds).To(ContainElement(movev1alpha1.KindCount{Kind: "Cluster.cluster.x-k8s.io", Count: 2}))
	g.Expect(done.Status.Plan.Groups).To(BeNumerically(">", 1))
	ready := meta.FindStatusCondition(done.Status.Conditions, movev1alpha1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(movev1alpha1.ReasonDryRun))
	g.Expect(kstatusOf(g, done)).To(Equal(status.CurrentStatus))
	g.Expect(done.Status.Controllers).To(BeEmpty())

	g.Expect(resourceVersions(ctx, g, env.Source, f.Namespaces)).To(Equal(sourceBefore), "a dry run writes nothing to the source")
	g.Expect(resourceVersions(ctx, g, env.Target, f.Namespaces)).To(Equal(targetBefore), "a dry run writes nothing to the target")
}
