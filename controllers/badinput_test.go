//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

func TestBadInputIsReportedAndNothingIsWritten(t *testing.T) {
	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := testenv.NewNamespace(t, movetest.Env.Source, "bad-input")

	execKubeconfig := strings.Replace(string(movetest.TargetKubeconfig), "  user:\n",
		"  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: gke-gcloud-auth-plugin\n      interactiveMode: Never\n", 1)
	if execKubeconfig == string(movetest.TargetKubeconfig) {
		t.Fatal("the target kubeconfig has no \"  user:\" line to put the exec plugin under")
	}
	movetest.NewSecret(t, ns, "no-key", map[string][]byte{"kubeconfig": movetest.TargetKubeconfig})
	movetest.NewSecret(t, ns, "malformed", map[string][]byte{"value": []byte("clusters: [ {")})
	movetest.NewSecret(t, ns, "exec-plugin", map[string][]byte{"value": []byte(execKubeconfig)})
	movetest.NewSecret(t, ns, "itself", map[string][]byte{"value": movetest.SourceKubeconfig})
	movetest.NewSecret(t, ns, "target", map[string][]byte{"value": movetest.TargetKubeconfig})

	cases := []struct {
		name       string
		spec       movev1alpha1.MoveOperationSpec
		wantPhase  movev1alpha1.MovePhase
		wantReason string
		wantInMsg  string
		alsoInMsg  []string
	}{
		{
			name: "a missing Secret stalls the move until it exists", spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("absent")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonTargetSecretNotFound, wantInMsg: "create secret generic absent",
		},
		{
			name: "a Secret without the key names the keys it has", spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("no-key")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonTargetSecretKeyNotFound, wantInMsg: `keys present: "kubeconfig"`,
		},
		{
			name: "a malformed kubeconfig is reported as such", spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("malformed")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonInvalidKubeconfig, wantInMsg: "cannot be parsed",
		},
		{
			name: "a kubeconfig with an exec plugin is refused", spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("exec-plugin")},
			wantPhase: movev1alpha1.PhaseValidating, wantReason: movev1alpha1.ReasonInvalidKubeconfig, wantInMsg: "gke-gcloud-auth-plugin",
		},
		{
			name: "a target that is the source itself fails the move", spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("itself")},
			wantPhase: movev1alpha1.PhaseFailed, wantReason: movev1alpha1.ReasonTargetIsSource, wantInMsg: "source cluster itself",
		},
		{
			name:      "a namespace that does not exist fails the move",
			spec:      movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: []string{"no-such-namespace"}},
			wantPhase: movev1alpha1.PhaseFailed, wantReason: movev1alpha1.ReasonNamespaceNotFound, wantInMsg: `"no-such-namespace"`,
		},
		{
			// Every check runs: the first finding gives the reason, the
			// message names them all, so one dry run shows what to fix.
			name: "every problem is named at once",
			spec: movev1alpha1.MoveOperationSpec{
				Target: movetest.TargetRef("target"), Namespaces: []string{"no-such-namespace", "nor-this-one"}, DryRun: true,
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
			mo := movetest.NewMoveOperation(t, ns, "bad-"+string(rune('a'+i)), tc.spec)
			var got *movev1alpha1.MoveOperation
			g.Eventually(func(g Gomega) {
				got = movetest.Get(g, mo)
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
			g.Expect(movetest.KstatusOf(g, got)).To(Equal(status.FailedStatus))
			for _, also := range tc.alsoInMsg {
				g.Expect(got.Status.FailureMessage).To(ContainSubstring(also))
			}
			if tc.wantPhase == movev1alpha1.PhaseFailed {
				g.Expect(got.Status.FailureReason).To(Equal(tc.wantReason))
				g.Expect(got.Status.CompletionTime).NotTo(BeNil())
			}
			movetest.AssertNothingWritten(g, got)
			g.Expect(fmt.Sprintf("%+v", got.Status)).NotTo(ContainSubstring("LS0tLS1CRUdJTi"), "no kubeconfig content may reach the status")
		})
	}

	t.Run("a second MoveOperation waits while one is active", func(t *testing.T) {
		g := NewWithT(t)
		first := movetest.NewMoveOperation(t, ns, "first", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("absent")})
		g.Eventually(func(g Gomega) {
			g.Expect(movetest.Get(g, first).Status.Phase).To(Equal(movev1alpha1.PhaseValidating))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		second := movetest.NewMoveOperation(t, ns, "second", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target")})
		g.Eventually(func(g Gomega) {
			got := movetest.Get(g, second)
			g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhasePending))
			ready := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(movev1alpha1.ReasonWaitingForActiveOperation))
			g.Expect(ready.Message).To(ContainSubstring(ns + "/first"))
			g.Expect(movetest.KstatusOf(g, got)).To(Equal(status.InProgressStatus))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(movetest.Get(g, second).Status.Phase).To(Equal(movev1alpha1.PhasePending))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		movetest.AssertNothingWritten(g, first, second)

		// Once the first is gone, the second starts.
		movetest.DeleteMoveOperation(t, first)
		g.Eventually(func(g Gomega) {
			g.Expect(movetest.Get(g, second).Status.Phase).NotTo(Equal(movev1alpha1.PhasePending))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		movetest.DeleteMoveOperation(t, second)
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
	rc := movetest.NewRollbackCase(t, "ownsecret")
	ctx := context.Background()
	g := NewWithT(t)
	wc := rc.Fleet.Clusters[0]
	secret := &corev1.Secret{}
	g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name + "-kubeconfig"}, secret)).To(Succeed())
	secret.Data["value"] = movetest.TargetKubeconfig // the target is the workload cluster
	g.Expect(movetest.Env.Source.Client.Update(ctx, secret)).To(Succeed())

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, wc.Namespace, "own-secret", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef(secret.Name), Namespaces: rc.Fleet.Namespaces,
	})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonTargetSecretMoves))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("Secret %s/%s", wc.Namespace, secret.Name)))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("copy the kubeconfig to a Secret of its own"))
	movetest.AssertNothingWritten(g, failed)
	g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(secret.Finalizers).To(BeEmpty(), "the move never held the Secret")

	// The same Secret's kubeconfig, copied as the message says, moves.
	movetest.NewSecret(t, wc.Namespace, "move-target", map[string][]byte{"value": movetest.TargetKubeconfig})
	mo = movetest.NewMoveOperation(t, wc.Namespace, "own-secret-copied", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("move-target"), Namespaces: rc.Fleet.Namespaces,
	})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
}
