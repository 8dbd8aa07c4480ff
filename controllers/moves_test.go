//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

func TestAMoveOfEveryNamespaceTakesTheWholeFleetAndRestoresEverything(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	prefix := "all" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(1), Namespaces: []string{prefix + "-a", prefix + "-b"}, Name: prefix})

	// Replica counts 1, 2 and 3 must come back as they were, also for the
	// target's infrastructure provider, whose annotation somebody removes
	// during the move: the MoveOperation status still records its count,
	// which wins over the fallback (2).
	movetest.SetProviderReplicas(t, movetest.Env.Source, capiprovider.CoreProvider, 2)
	movetest.SetProviderReplicas(t, movetest.Env.Target, capiprovider.KubeadmBootstrapProvider, 3)
	infra := movetest.Env.Target.CAPI.Provider(capiprovider.LoopInfrastructureProvider)
	infraKey := types.NamespacedName{Namespace: infra.Namespace, Name: infra.Deployment}

	applied := applyAsTopology(ctx, t, f.Namespaces[0])

	stateBefore := movetest.StateOf(ctx, g)
	sourceBefore := movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces)
	t.Logf("moving %d objects: %v", len(sourceBefore.Objects), sourceBefore.Kinds())
	o, _ := sourceBefore.Get(applied)
	g.Expect(o.Managers).To(ContainElement(And(HaveField("Manager", "capi-topology"),
		HaveField("Fields", ContainElement(HavePrefix(`f:metadata.f:ownerReferences.k:{"owner":"Cluster.cluster.x-k8s.io/`))))),
		"the snapshot of %s shows the Apply manager's owner reference", applied)

	ups := &movetest.ScaleUps{}
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		ups.Observe(cluster, verb, obj)
		if d, ok := obj.(*appsv1.Deployment); ok && cluster == "target" && client.ObjectKeyFromObject(d) == infraKey && ptr.Deref(d.Spec.Replicas, 1) == 0 {
			// Somebody removes the record while the controller is down.
			cur := &appsv1.Deployment{}
			if err := movetest.Env.Target.Client.Get(ctx, infraKey, cur); err == nil {
				patch := client.MergeFrom(cur.DeepCopy())
				delete(cur.Annotations, movev1alpha1.OriginalReplicasAnnotation)
				_ = movetest.Env.Target.Client.Patch(ctx, cur, patch)
			}
		}
	}})
	ns := movetest.OpsNamespace(t)
	mo := movetest.NewMoveOperation(t, ns, "move-all", movev1alpha1.MoveOperationSpec{
		Target:      movetest.TargetRef("target"),
		Controllers: movev1alpha1.ControllersSpec{FallbackReplicas: ptr.To[int32](2)},
	})
	done, seen := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)

	t.Run("the status tells the whole story", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(seen).To(HaveKey(status.InProgressStatus), "kstatus must report InProgress while moving")
		g.Expect(movetest.KstatusOf(g, done)).To(Equal(status.CurrentStatus))
		ready := meta.FindStatusCondition(done.Status.Conditions, movev1alpha1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		for _, c := range []string{movev1alpha1.ValidatedCondition, movev1alpha1.ControllersRecordedCondition, movev1alpha1.ControllersScaledDownCondition,
			movev1alpha1.ObjectsCopiedCondition, movev1alpha1.ObjectsDeletedCondition, movev1alpha1.TargetRestoredCondition, movev1alpha1.SourceRestoredCondition} {
			g.Expect(meta.IsStatusConditionTrue(done.Status.Conditions, c)).To(BeTrue(), "condition %s", c)
		}
		var phases []movev1alpha1.MovePhase
		for _, p := range done.Status.PhaseTransitions {
			phases = append(phases, p.Phase)
		}
		g.Expect(phases).To(Equal(controllers.Path()))
		g.Expect(done.Status.Plan).NotTo(BeNil())
		g.Expect(done.Status.Progress.Copied).To(Equal(done.Status.Progress.Total))
		g.Expect(done.Status.Progress.Summary).To(Equal(fmt.Sprintf("%d/%d", done.Status.Progress.Total, done.Status.Progress.Total)))
		g.Expect(done.Status.StartTime).NotTo(BeNil())
		g.Expect(done.Status.CompletionTime).NotTo(BeNil())
		g.Expect(done.Status.Controllers).To(HaveLen(2 * len(movetest.Env.Source.CAPI.Providers)))
	})

	t.Run("what arrived is exactly what was there", func(t *testing.T) {
		g := NewWithT(t)
		targetAfter := movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces)
		if diff := snapshot.Diff(movetest.InNamespaces(sourceBefore, f.Namespaces...), movetest.InNamespaces(targetAfter, f.Namespaces...)); diff != "" {
			t.Fatalf("the target differs from the source before the move:\n%s", diff)
		}
		movetest.AssertOwnersExist(ctx, g, movetest.Env.Target.Client, f.Namespaces)
	})

	t.Run("only global objects remain in the source", func(t *testing.T) {
		g := NewWithT(t)
		sourceAfter := movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces)
		for _, o := range movetest.InNamespaces(sourceAfter, f.Namespaces...).Objects {
			// The global identity's credentials belong to its hierarchy:
			// copied, never deleted, like the identity itself.
			g.Expect(o.Owners).To(ConsistOf(HaveField("Kind", "LoopClusterIdentity.infrastructure.cluster.x-k8s.io")),
				"%s stays in the source but is neither global nor owned by a global object", o.Key())
		}
		id := snapshot.Key{Kind: "LoopClusterIdentity.infrastructure.cluster.x-k8s.io", Name: f.Identities[0]}
		_, inSource := sourceAfter.Get(id)
		g.Expect(inSource).To(BeTrue(), "the global identity stays in the source")
		_, inTarget := movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces).Get(id)
		g.Expect(inTarget).To(BeTrue(), "and is copied to the target")
	})

	t.Run("controllers and webhooks are back as they were, target first", func(t *testing.T) {
		g := NewWithT(t)
		stateAfter := movetest.StateOf(ctx, g)
		g.Expect(stateAfter.Replicas).To(Equal(stateBefore.Replicas))
		g.Expect(stateAfter.Webhooks).To(Equal(stateBefore.Webhooks), "webhook configurations must be byte-for-byte as before")
		order := ups.Clusters()
		g.Expect(order).To(HaveLen(2 * len(movetest.Env.Source.CAPI.Providers)))
		for i, c := range order {
			want := "target"
			if i >= len(movetest.Env.Source.CAPI.Providers) {
				want = "source"
			}
			g.Expect(c).To(Equal(want), "scale-up %d of %v", i, order)
		}
	})

	t.Run("nothing is left paused", func(t *testing.T) {
		g := NewWithT(t)
		movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, f.Namespaces)
		movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
	})
}

// A status write can lose to a conflict (the reconcile began from a stale
// copy) after the step it reports was done: the step is not done again, so
// the next status must still count it. The operator's writes of the last
// copy progress and of the last delete progress are refused once each.
// applyAsTopology gives the first MachineDeployment of a namespace a
// server-side-apply manager, as Cluster API's topology controller is, that
// holds a label and the owner reference to the Cluster: a move must leave
// it holding them, the reference named by the Cluster's UID in the target.
// It returns the MachineDeployment's snapshot key.
func applyAsTopology(ctx context.Context, t *testing.T, namespace string) snapshot.Key {
	t.Helper()
	mds := &unstructured.UnstructuredList{}
	mds.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeploymentList"})
	if err := movetest.Env.Source.Client.List(ctx, mds, client.InNamespace(namespace)); err != nil || len(mds.Items) == 0 {
		t.Fatalf("listing the MachineDeployments of %s: %v (%d found)", namespace, err, len(mds.Items))
	}
	md := mds.Items[0]
	intent := &unstructured.Unstructured{}
	intent.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"})
	intent.SetNamespace(md.GetNamespace())
	intent.SetName(md.GetName())
	intent.SetLabels(map[string]string{"move-test/applied": "yes"})
	intent.SetOwnerReferences(md.GetOwnerReferences())
	//nolint:staticcheck // an apply patch as Cluster API topology sends it
	if err := movetest.Env.Source.Client.Patch(ctx, intent, client.Apply, client.FieldOwner("capi-topology"), client.ForceOwnership); err != nil {
		t.Fatalf("applying to MachineDeployment %s/%s: %v", md.GetNamespace(), md.GetName(), err)
	}
	return snapshot.Key{Kind: "MachineDeployment.cluster.x-k8s.io", Namespace: md.GetNamespace(), Name: md.GetName()}
}

func TestProgressCountsStepsWhoseStatusWriteWasLostToAConflict(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "lostwrite")
	var lostCopy, lostDelete sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{FailIf: func(_, verb string, obj client.Object) error {
		mo, ok := obj.(*movev1alpha1.MoveOperation)
		if !ok || verb != "patch/status" || mo.Status.Progress == nil {
			return nil
		}
		p := mo.Status.Progress
		var err error
		conflict := func() {
			err = apierrors.NewConflict(movev1alpha1.GroupVersion.WithResource("moveoperations").GroupResource(), mo.Name, nil)
		}
		switch {
		case mo.Status.Phase == movev1alpha1.PhaseCopying && p.Total > 0 && p.Copied == p.Total:
			lostCopy.Do(conflict)
		case mo.Status.Phase == movev1alpha1.PhaseDeleting && p.DeletedGroups == mo.Status.Plan.Groups:
			lostDelete.Do(conflict)
		}
		return err
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "lost-writes", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
	g := NewWithT(t)
	g.Expect(done.Status.Progress.Copied).To(Equal(done.Status.Progress.Total), "copied")
	g.Expect(done.Status.Progress.CopiedGroups).To(Equal(done.Status.Plan.Groups))
	g.Expect(done.Status.Progress.DeletedGroups).To(Equal(done.Status.Plan.Groups), "deleted groups")
	g.Expect(done.Status.Progress.Deleted).To(BeNumerically(">", 0))
}
