//go:build cluster

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

func TestATargetWithoutACRDFailsTheMoveBeforeAnythingIsWritten(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "nocrd")
	g := NewWithT(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	name := "machinehealthchecks.cluster.x-k8s.io"
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
	g.Expect(movetest.Env.Target.Client.Delete(ctx, crd)).To(Succeed())
	t.Cleanup(func() {
		restored := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name, Labels: crd.Labels, Annotations: crd.Annotations}, Spec: crd.Spec}
		g := NewWithT(t)
		g.Eventually(func() error { return movetest.Env.Target.Client.Create(ctx, restored) }, time.Minute, 200*time.Millisecond).Should(Succeed())
		g.Eventually(func() error {
			return movetest.Env.Target.Client.List(ctx, &clusterv1.MachineHealthCheckList{})
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})
	g.Eventually(func() bool {
		return movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}) != nil
	}, time.Minute, 100*time.Millisecond).Should(BeTrue())

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, rc.Ops, "no-crd", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCRDMismatch)
	g.Expect(movetest.Get(g, mo).Status.FailureMessage).To(ContainSubstring("machinehealthchecks"))
}

func TestAConflictingObjectInTheTargetRollsTheMoveBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "conflict")
	ctx := context.Background()
	ns, clusterName := rc.Fleet.Clusters[0].Namespace, rc.Fleet.Clusters[0].Name
	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		// Once the move has validated and started stopping controllers,
		// somebody creates an object of the fleet in the target.
		if _, ok := obj.(*appsv1.Deployment); !ok || cluster != "target" {
			return
		}
		once.Do(func() {
			_ = movetest.Env.Target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			_ = movetest.Env.Target.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName + "-kubeconfig"},
				StringData: map[string]string{"value": "not the moved one"}})
		})
	}})
	t.Cleanup(func() {
		_ = movetest.Env.Target.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName + "-kubeconfig"}})
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "conflict", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonTargetConflict)
	g := NewWithT(t)
	g.Expect(movetest.Get(g, mo).Status.FailureMessage).To(ContainSubstring(clusterName + "-kubeconfig"))
	left := &corev1.Secret{}
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-kubeconfig"}, left)).To(Succeed())
	g.Expect(string(left.Data["value"])).To(Equal("not the moved one"), "the rollback must never delete what the move did not create")
}

// While the move copies, nobody but the operator gets past the stopped
// providers' webhooks: a Machine created then by another identity (a
// provider that ignores pause) is refused. An object of a kind no stopped
// webhook guards (here a Secret owned by the moved Cluster) is created, and
// one the move copied (the Cluster's kubeconfig Secret) is deleted: both are
// found before the point of no return, where the move reads the source again
// after its last group, and the move rolls back.
func TestAnObjectCreatedOrDeletedWhileCopyingRollsTheMoveBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "rogue")
	ctx := context.Background()
	g := NewWithT(t)
	wc := rc.Fleet.Clusters[0]
	cluster := &clusterv1.Cluster{}
	g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, cluster)).To(Succeed())
	rogue := snapshot.Key{Kind: "Secret", Namespace: wc.Namespace, Name: wc.Name + "-rogue"}
	victim := snapshot.Key{Kind: "Secret", Namespace: wc.Namespace, Name: wc.Name + "-kubeconfig"}
	machines := &clusterv1.MachineList{}
	g.Expect(movetest.Env.Source.Client.List(ctx, machines, client.InNamespace(wc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: wc.Name})).To(Succeed())
	g.Expect(machines.Items).NotTo(BeEmpty())
	rogueMachine := machines.Items[0].DeepCopy()
	rogueMachine.ObjectMeta = metav1.ObjectMeta{Namespace: wc.Namespace, Name: rogueMachine.Name + "-rogue", Labels: rogueMachine.Labels, OwnerReferences: rogueMachine.OwnerReferences}
	rogueMachine.Status = clusterv1.MachineStatus{}
	var machineErr atomic.Value // the error creating the rogue Machine, as a string

	var once, deleteOnce sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster_, verb string, obj client.Object) {
		if cluster_ != "target" || verb != "create" {
			return
		}
		if obj.GetNamespace() == victim.Namespace && obj.GetName() == victim.Name {
			// The move read it from the source to copy it; somebody
			// deletes it there.
			deleteOnce.Do(func() {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim.Namespace, Name: victim.Name}}
				if err := movetest.Env.Source.Client.Delete(ctx, s); err != nil {
					t.Errorf("deleting the victim Secret: %v", err)
				}
			})
		}
		// The move has recorded its plan and copies: somebody adds a
		// Secret to the Cluster's hierarchy in the source.
		once.Do(func() {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rogue.Namespace, Name: rogue.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID}}}}
			if err := movetest.Env.Source.Client.Create(ctx, s); err != nil {
				t.Errorf("creating the rogue Secret: %v", err)
			}
			machineErr.Store(fmt.Sprint(movetest.Env.Source.Client.Create(ctx, rogueMachine)))
		})
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "rogue", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonObjectsChanged, rogue, victim)
	g.Expect(movetest.Get(g, mo).Status.FailureMessage).To(
		MatchRegexp(`Secret %s/%s appeared and .*Secret %s/%s vanished`, rogue.Namespace, rogue.Name, victim.Namespace, victim.Name))
	g.Expect(machineErr.Load()).To(ContainSubstring("webhook"), "the stopped provider's webhook refuses everyone but the operator")
}

// An object deleted from the source after the plan was recorded and before
// the move copies it does not come back: the move rolls back as soon as the
// copy reads it, rather than retrying it until spec.timeouts.copy (here an
// hour) with every provider stopped.
func TestAnObjectDeletedBeforeItsCopyRollsTheMoveBackAtOnce(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "vanish")
	ctx := context.Background()
	wc := rc.Fleet.Clusters[0]
	victim := snapshot.Key{Kind: "Secret", Namespace: wc.Namespace, Name: wc.Name + "-kubeconfig"}
	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster_, verb string, _ client.Object) {
		if cluster_ != "target" || verb != "create" {
			return
		}
		// The move has recorded its plan and begun to copy: somebody
		// deletes an object of a later group from the source.
		once.Do(func() {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim.Namespace, Name: victim.Name}}
			if err := movetest.Env.Source.Client.Delete(ctx, s); err != nil {
				t.Errorf("deleting the victim Secret: %v", err)
			}
		})
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "vanish", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Hour}}})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonObjectsChanged, victim)
	g := NewWithT(t)
	g.Expect(movetest.Get(g, mo).Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("Secret %s/%s vanished from the source while the move copied", victim.Namespace, victim.Name)))
}

func TestAnUnreachableTargetDuringCopyingRollsTheMoveBackOnceItIsBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "unreach")
	g := NewWithT(t)

	proxy := movetest.StartProxy(t, movetest.Env.Target.Config.Host)
	kubeconfig := strings.Replace(string(movetest.TargetKubeconfig), proxy.Upstream, proxy.Addr, 1)
	g.Expect(kubeconfig).NotTo(Equal(string(movetest.TargetKubeconfig)), "the kubeconfig must point at the proxy")
	movetest.NewSecret(t, rc.Ops, "via-proxy", map[string][]byte{"value": []byte(kubeconfig)})

	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		if cluster == "target" && verb == "create" {
			proxy.Cut() // the target goes away as copying begins
		}
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "unreachable", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("via-proxy"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: 3 * time.Second}},
	})

	// While the target is away, the status says what the operator waits for.
	g.Eventually(func(g Gomega) {
		got := movetest.Get(g, mo)
		g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.FailureReason).To(Equal(movev1alpha1.ReasonCopyTimeout))
		ready := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Message).To(ContainSubstring("target"))
		g.Expect(ready.Message).To(ContainSubstring("retrying"))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(movetest.Get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack), "the rollback cannot finish without the target")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	// The source does not wait for the target: its controllers are back and
	// its objects unpaused while the target is still away.
	g.Eventually(func(g Gomega) {
		g.Expect(movetest.StateIn(context.Background(), g, movetest.Env.Source).Replicas).To(Equal(movetest.SourceReplicas(rc.StateBefore)))
		movetest.AssertNoMoveMarks(context.Background(), g, movetest.Env.Source.Client, rc.Fleet.Namespaces)
	}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the source must be restored while the target is away")
	g.Expect(proxy.Cuts.Load()).To(BeNumerically(">=", 1), "the target is still cut")

	proxy.Restore()
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	g.Expect(proxy.Cuts.Load()).To(BeNumerically(">=", 1))
}

// A move whose plan cannot be recorded (the MoveOperation's namespace
// refuses the ConfigMaps: a quota, a policy) copies nothing, and does not
// retry for ever with every provider stopped: once Copying has made no
// progress for spec.timeouts.copy, it rolls back.
func TestAPlanThatCannotBeRecordedRollsTheMoveBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "norecord")
	movetest.StartOperator(t, movetest.OperatorOptions{FailIf: func(cluster, verb string, obj client.Object) error {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cluster == "source" && verb == "create" && cm.Labels[movev1alpha1.PlanOfLabel] != "" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("exceeded quota: fault injected by the test"))
		}
		return nil
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Second}},
	})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	g := NewWithT(t)
	g.Expect(movetest.Get(g, mo).Status.FailureMessage).To(ContainSubstring("exceeded quota"))
}
