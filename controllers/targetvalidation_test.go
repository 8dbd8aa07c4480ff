//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
)

// refuseInTarget installs in the target an admission policy that refuses
// dry-run updates of the MachineDeployments of one namespace: it stands in
// for a webhook of the target's providers that rejects a moved object (a
// field another provider version refuses). Only dry runs: the policy is no
// webhook, so the bypass does not skip it, and it must let the copy itself
// through.
func refuseInTarget(t *testing.T, ns string) {
	ctx := context.Background()
	g := NewWithT(t)
	name := "refuse-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"machinedeployments"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "dry-run", Expression: "request.dryRun == true"},
				{Name: "namespace", Expression: fmt.Sprintf("request.namespace == %q", ns)},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "refused by the test's stand-in for a provider webhook"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	g.Expect(movetest.Env.Target.Client.Create(ctx, policy)).To(Succeed())
	g.Expect(movetest.Env.Target.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = movetest.Env.Target.Client.Delete(context.Background(), binding)
		_ = movetest.Env.Target.Client.Delete(context.Background(), policy)
	})
}

// TestTheTargetsWebhooksCheckTheMovedObjects: with the bypass, the target's
// webhooks never saw the copies; once its providers run again, a dry-run
// update of the first object of every kind (spec.targetValidation Sample)
// goes through them, and a refusal is reported (a plan warning and a
// Warning event) while the move completes: it is past its point of no
// return, and the objects are there. None checks nothing.
func TestTheTargetsWebhooksCheckTheMovedObjects(t *testing.T) {
	movetest.EnsureSetup(t)
	movetest.StartOperator(t, movetest.OperatorOptions{})
	for _, mode := range []movev1alpha1.TargetValidation{movev1alpha1.TargetValidationSample, movev1alpha1.TargetValidationNone} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			g := NewWithT(t)
			name := "validate-" + rand.String(4)
			f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})
			refuseInTarget(t, name)
			ops := movetest.OpsNamespace(t)
			mo := movetest.NewMoveOperation(t, ops, "move", movev1alpha1.MoveOperationSpec{
				Target: movetest.TargetRef("target"), Namespaces: f.Namespaces, TargetValidation: mode,
			})
			done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
			refused := ContainElement(And(ContainSubstring("MachineDeployment"), ContainSubstring("refused by the test's stand-in")))
			if mode == movev1alpha1.TargetValidationNone {
				g.Expect(done.Status.Plan.Warnings).NotTo(refused)
				return
			}
			g.Expect(done.Status.Plan.Warnings).To(refused)
			g.Expect(done.Status.Plan.Warnings).NotTo(ContainElement(ContainSubstring("could not")), "every sampled object was checked")
			g.Eventually(func(g Gomega) {
				events := &eventsv1.EventList{}
				g.Expect(movetest.Client.List(ctx, events, client.InNamespace(ops))).To(Succeed())
				found := false
				for _, e := range events.Items {
					found = found || (e.Regarding.Name == mo.Name && e.Reason == movev1alpha1.ReasonTargetValidationFailed && e.Type == "Warning")
				}
				g.Expect(found).To(BeTrue(), "a Warning event says what the target refuses")
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
			movetest.DeleteMoveOperation(t, mo)
		})
	}
}
