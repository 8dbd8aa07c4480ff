//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/test/testenv"
)

func targetRef(name string) movev1alpha1.TargetSpec {
	return movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: name}}
}

// kstatusOf computes the MoveOperation's status the way kubectl wait, Flux
// and Argo CD's kstatus-based tools do.
func kstatusOf(g Gomega, mo *movev1alpha1.MoveOperation) status.Status {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mo)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructuredObj{Object: u})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// assertNothingWritten checks that no move left a mark in either cluster:
// no recorded replicas, no webhook bypass, no namespace created in the target.
func assertNothingWritten(g Gomega, mos ...*movev1alpha1.MoveOperation) {
	ctx := context.Background()
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		deployments := &appsv1.DeploymentList{}
		g.Expect(m.Client.List(ctx, deployments)).To(Succeed())
		for _, d := range deployments.Items {
			g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation), "Deployment %s/%s in %s", d.Namespace, d.Name, m.Name)
		}
		bypassed, err := quiesce.BypassInstalled(ctx, m.Client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(bypassed).To(BeEmpty(), "no webhook bypass may be left in %s", m.Name)
	}
	namespaces := &corev1.NamespaceList{}
	g.Expect(env.Target.Client.List(ctx, namespaces)).To(Succeed())
	for _, mo := range mos {
		for _, ns := range namespaces.Items {
			for _, e := range ns.ManagedFields {
				g.Expect(e.Manager).NotTo(Equal(move.FieldOwner(string(mo.UID))), "no namespace may be created in the target: %s was", ns.Name)
			}
		}
		recorded, err := planrecord.Exists(ctx, env.Source.Client, mo.Namespace, mo.UID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(recorded).To(BeFalse(), "no plan may be recorded for %s", mo.Name)
	}
}

func TestBadInputIsReportedAndNothingIsWritten(t *testing.T) {
	startOperator(t, operatorOptions{})
	ns := testenv.NewNamespace(t, env.Source, "bad-input")

	execKubeconfig := strings.Replace(string(targetKubeconfig), "  user:\n",
		"  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: gke-gcloud-auth-plugin\n      interactiveMode: Never\n", 1)
	if execKubeconfig == string(targetKubeconfig) {
		t.Fatal("the target kubeconfig has no \"  user:\" line to put the exec plugin under")
	}
	newSecret(t, ns, "no-key", map[string][]byte{"kubeconfig": targetKubeconfig})
	newSecret(t, ns, "malformed", map[string][]byte{"value": []byte("clusters: [ {")})
	newSecret(t, ns, "exec-plugin", map[string][]byte{"value": []byte(execKubeconfig)})
	newSecret(t, ns, "itself", map[string][]byte{"value": sourceKubeconfig})
	newSecret(t, ns, "target", map[string][]byte{"value": targetKubeconfig})

	cases := []struct {
		name       string
		spec       movev1alpha1.MoveOperationSpec
		wantPhase  movev1alpha1.MovePhase
		wantReason string
		wantInMsg  string
		alsoInMsg  []string
	}{
		{
			name: "a missing Secret stalls the move until it exists", spec: movev1alpha1.MoveOperationSpec{Target: targetRef("absent")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonTargetSecretNotFound, wantInMsg: "create secret generic absent",
		},
		{
			name: "a Secret without the key names the keys it has", spec: movev1alpha1.MoveOperationSpec{Target: targetRef("no-key")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonTargetSecretKeyNotFound, wantInMsg: `keys present: "kubeconfig"`,
		},
		{
			name: "a malformed kubeconfig is reported as such", spec: movev1alpha1.MoveOperationSpec{Target: targetRef("malformed")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonInvalidKubeconfig, wantInMsg: "cannot be parsed",
		},
		{
			name: "a kubeconfig with an exec plugin is refused", spec: movev1alpha1.MoveOperationSpec{Target: targetRef("exec-plugin")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonInvalidKubeconfig, wantInMsg: "gke-gcloud-auth-plugin",
		},
		{
			name: "a target that is the source itself fails the move", spec: movev1alpha1.MoveOperationSpec{Target: targetRef("itself")},
			wantPhase: movev1alpha1.PhaseFailed, wantReason: movev1alpha1.ReasonTargetIsSource, wantInMsg: "source cluster itself",
		},
		{
			name:      "a namespace that does not exist fails the move",
			spec:      movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: []string{"no-such-namespace"}},
			wantPhase: movev1alpha1.PhaseFailed, wantReason: movev1alpha1.ReasonNamespaceNotFound, wantInMsg: `"no-such-namespace"`,
		},
		{
			// Every check runs: the first finding gives the reason, the
			// message names them all, so one dry run shows what to fix.
			name: "every problem is named at once",
			spec: movev1alpha1.MoveOperationSpec{
				Target: targetRef("target"), Namespaces: []string{"no-such-namespace", "nor-this-one"}, DryRun: true,
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"not a label key!": "x"}},
			},
			wantPhase: movev1alpha1.PhaseFailed, wantReason: movev1alpha1.ReasonInvalidSelector,
			wantInMsg: `spec.clusterSelector is not a valid label selector`,
			alsoInMsg: []string{`"no-such-namespace"`, `"nor-this-one"`},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mo := newMoveOperation(t, ns, "bad-"+string(rune('a'+i)), tc.spec)
			var got *movev1alpha1.MoveOperation
			g.Eventually(func(g Gomega) {
				got = get(g, mo)
				g.Expect(got.Status.Phase).To(Equal(tc.wantPhase))
				stalled := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.StalledCondition)
				g.Expect(stalled).NotTo(BeNil(), "the Stalled condition says a human must act")
				g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(stalled.Reason).To(Equal(tc.wantReason))
				g.Expect(stalled.Message).To(ContainSubstring(tc.wantInMsg))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

			ready := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(tc.wantReason))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReconcilingCondition)).To(BeNil(),
				"a stalled move is not reconciling")
			g.Expect(kstatusOf(g, got)).To(Equal(status.FailedStatus))
			for _, also := range tc.alsoInMsg {
				g.Expect(got.Status.FailureMessage).To(ContainSubstring(also))
			}
			if tc.wantPhase == movev1alpha1.PhaseFailed {
				g.Expect(got.Status.FailureReason).To(Equal(tc.wantReason))
				g.Expect(got.Status.CompletionTime).NotTo(BeNil())
			}
			assertNothingWritten(g, got)
			g.Expect(fmt.Sprintf("%+v", got.Status)).NotTo(ContainSubstring("LS0tLS1CRUdJTi"), "no kubeconfig content may reach the status")
		})
	}

	t.Run("a second MoveOperation waits while one is active", func(t *testing.T) {
		g := NewWithT(t)
		first := newMoveOperation(t, ns, "first", movev1alpha1.MoveOperationSpec{Target: targetRef("absent")})
		g.Eventually(func(g Gomega) {
			g.Expect(get(g, first).Status.Phase).To(Equal(movev1alpha1.PhaseValidating))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		second := newMoveOperation(t, ns, "second", movev1alpha1.MoveOperationSpec{Target: targetRef("target")})
		g.Eventually(func(g Gomega) {
			got := get(g, second)
			g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhasePending))
			ready := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(movev1alpha1.ReasonWaitingForActiveOperation))
			g.Expect(ready.Message).To(ContainSubstring(ns + "/first"))
			g.Expect(kstatusOf(g, got)).To(Equal(status.InProgressStatus))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(get(g, second).Status.Phase).To(Equal(movev1alpha1.PhasePending))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		assertNothingWritten(g, first, second)

		// Once the first is gone, the second starts.
		deleteMoveOperation(t, first)
		g.Eventually(func(g Gomega) {
			g.Expect(get(g, second).Status.Phase).NotTo(Equal(movev1alpha1.PhasePending))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		deleteMoveOperation(t, second)
	})
}

// Moving a bootstrap cluster's state into the workload cluster it created
// invites naming that Cluster's own kubeconfig Secret as the target's: it
// holds the right kubeconfig, and it moves with its Cluster. Deleting would
// then delete it from the source while the move still needs the target
// (RestoringTarget waited for it for ever, every provider of the target at
// zero): refused in Validating, before anything is written, naming the
// Secret and what to do.
func TestATargetKubeconfigSecretThatTheMoveWouldTakeIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	rc := newRollbackCase(t, "ownsecret")
	ctx := context.Background()
	g := NewWithT(t)
	wc := rc.f.Clusters[0]
	secret := &corev1.Secret{}
	g.Expect(env.Source.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name + "-kubeconfig"}, secret)).To(Succeed())
	secret.Data["value"] = targetKubeconfig // the target is the workload cluster
	g.Expect(env.Source.Client.Update(ctx, secret)).To(Succeed())

	startOperator(t, operatorOptions{})
	mo := newMoveOperation(t, wc.Namespace, "own-secret", movev1alpha1.MoveOperationSpec{
		Target: targetRef(secret.Name), Namespaces: rc.f.Namespaces,
	})
	failed, _ := waitForPhase(t, mo, movev1alpha1.PhaseFailed, time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonTargetSecretMoves))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("Secret %s/%s", wc.Namespace, secret.Name)))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("copy the kubeconfig to a Secret of its own"))
	assertNothingWritten(g, failed)
	g.Expect(env.Source.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(secret.Finalizers).To(BeEmpty(), "the move never held the Secret")

	// The same Secret's kubeconfig, copied as the message says, moves.
	newSecret(t, wc.Namespace, "move-target", map[string][]byte{"value": targetKubeconfig})
	mo = newMoveOperation(t, wc.Namespace, "own-secret-copied", movev1alpha1.MoveOperationSpec{
		Target: targetRef("move-target"), Namespaces: rc.f.Namespaces,
	})
	waitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
}
