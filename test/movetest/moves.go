//go:build cluster

package movetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/test/testenv"
)

// WaitForPhase waits until the MoveOperation reaches phase, recording the
// kstatus of every state it passed through; it fails at once, with the
// conditions, when the move ends in another phase.
func WaitForPhase(t *testing.T, mo *movev1alpha1.MoveOperation, want movev1alpha1.MovePhase, timeout time.Duration) (*movev1alpha1.MoveOperation, map[status.Status]bool) {
	t.Helper()
	seen := map[status.Status]bool{}
	var got *movev1alpha1.MoveOperation
	deadline := time.Now().Add(timeout)
	for {
		g := NewWithT(t)
		got = Get(g, mo)
		captureStatus(t, got)
		seen[KstatusOf(g, got)] = true
		if got.Status.Phase == want {
			return got, seen
		}
		if got.Status.Phase.IsTerminal() || time.Now().After(deadline) {
			conds, _ := json.MarshalIndent(got.Status.Conditions, "", "  ")
			t.Fatalf("MoveOperation %s/%s is in phase %q, want %q; failure %s: %s\nconditions: %s\nlogs: %s",
				mo.Namespace, mo.Name, got.Status.Phase, want, got.Status.FailureReason, got.Status.FailureMessage, conds, Env.LogDirs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// OpsNamespace creates the namespace the MoveOperation and its Secret live
// in, with the target's kubeconfig under "target".
func OpsNamespace(t *testing.T) string {
	ns := testenv.NewNamespace(t, Env.Source, "ops")
	NewSecret(t, ns, "target", map[string][]byte{"value": TargetKubeconfig})
	return ns
}

// TargetRef names the Secret of the target's kubeconfig, in the
// MoveOperation's namespace, under the key "value".
func TargetRef(name string) movev1alpha1.TargetSpec {
	return movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: name}}
}

// KstatusOf computes the MoveOperation's status the way kubectl wait, Flux
// and Argo CD's kstatus-based tools do.
func KstatusOf(g Gomega, mo *movev1alpha1.MoveOperation) status.Status {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mo)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: u})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// AssertNothingWritten checks that no move left a mark in either cluster:
// no recorded replicas, no webhook bypass, no namespace created in the target.
func AssertNothingWritten(g Gomega, mos ...*movev1alpha1.MoveOperation) {
	ctx := context.Background()
	for _, m := range []*testenv.Management{Env.Source, Env.Target} {
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
	g.Expect(Env.Target.Client.List(ctx, namespaces)).To(Succeed())
	for _, mo := range mos {
		for _, ns := range namespaces.Items {
			for _, e := range ns.ManagedFields {
				g.Expect(e.Manager).NotTo(Equal(move.FieldOwner(string(mo.UID))), "no namespace may be created in the target: %s was", ns.Name)
			}
		}
		recorded, err := planrecord.Exists(ctx, Env.Source.Client, mo.Namespace, mo.UID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(recorded).To(BeFalse(), "no plan may be recorded for %s", mo.Name)
	}
}
