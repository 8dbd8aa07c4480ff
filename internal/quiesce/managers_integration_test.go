//go:build cluster

package quiesce_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/test/testenv"
)

// cluster-api-operator is found by its installers' label, or by the
// admission webhooks that name its API group; never by a webhook that
// matches every group, as a policy engine's does.
func TestClusterAPIOperatorIsFoundByItsLabelOrItsWebhooksOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Source.Client
	ns := testenv.NewNamespace(t, env.Source, "managers")

	deployment := func(name string, labels map[string]string) types.NamespacedName {
		pods := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: pods},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: pods},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		g.Expect(c.Create(ctx, d)).To(Succeed())
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	webhookFor := func(deploymentName, group string) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: deploymentName + "-webhook"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": deploymentName}, Ports: []corev1.ServicePort{{Port: 443}}},
		}
		g.Expect(c.Create(ctx, svc)).To(Succeed())
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + deploymentName},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:         "validate.example.com",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svc.Name}},
				// A resource nobody writes: the webhook must not slow the
				// shared cluster down.
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{"nothingswrittenhere"}},
				}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}
		g.Expect(c.Create(ctx, cfg)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), cfg) })
	}

	labelled := deployment("capi-operator-controller-manager", map[string]string{quiesce.CAPIOperatorLabel: quiesce.CAPIOperatorLabelValue})
	repackaged := deployment("platform-capi-operator", nil)
	webhookFor(repackaged.Name, "operator.cluster.x-k8s.io")
	policy := deployment("policy-engine", nil)
	webhookFor(policy.Name, "*")
	bystander := deployment("bystander", map[string]string{quiesce.CAPIOperatorLabel: "inventory"})

	found, err := quiesce.FindCAPIOperator(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(ContainElements(labelled, repackaged))
	g.Expect(found).NotTo(ContainElement(policy), "a webhook of every group is not cluster-api-operator's")
	g.Expect(found).NotTo(ContainElement(bystander), "the label counts only with cluster-api-operator's value")
}
