//go:build cluster

package quiesce_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/identity"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CAPI: true}, &env)
}

func providerSelector(t *testing.T) labels.Selector {
	req, err := labels.NewRequirement(movev1alpha1.DefaultControllerLabel, selection.Exists, nil)
	if err != nil {
		t.Fatal(err)
	}
	return labels.NewSelector().Add(*req)
}

// webhookState is what of the webhook configurations a move must give back
// exactly: every webhook, and the annotations.
func webhookState(ctx context.Context, g Gomega, c client.Client) map[string]string {
	out := map[string]string{}
	v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(c.List(ctx, v)).To(Succeed())
	for _, w := range v.Items {
		b, err := json.Marshal(struct {
			A map[string]string
			W []admissionregistrationv1.ValidatingWebhook
		}{w.Annotations, w.Webhooks})
		g.Expect(err).NotTo(HaveOccurred())
		out["validating/"+w.Name] = string(b)
	}
	m := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	g.Expect(c.List(ctx, m)).To(Succeed())
	for _, w := range m.Items {
		b, err := json.Marshal(struct {
			A map[string]string
			W []admissionregistrationv1.MutatingWebhook
		}{w.Annotations, w.Webhooks})
		g.Expect(err).NotTo(HaveOccurred())
		out["mutating/"+w.Name] = string(b)
	}
	return out
}

func TestControllersStopAndComeBackWithTheirWebhooksBypassedMeanwhile(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := env.Source
	c := m.Client
	core := m.CAPI.Provider(capiprovider.CoreProvider)
	coreKey := types.NamespacedName{Namespace: core.Namespace, Name: core.Deployment}

	// The core provider runs two replicas: what is restored must be 2, not
	// the fallback.
	scale(ctx, g, c, coreKey, 2)
	// At 2 already, as recorded: nothing to restore, only to check.
	g.Eventually(unavailable(ctx, c, []quiesce.Controller{{Key: coreKey, Recorded: ptr.To(int32(2))}}),
		time.Minute, 200*time.Millisecond).Should(BeEmpty(), "the core provider must reach 2 available replicas")

	controllers, err := quiesce.SelectControllers(ctx, c, providerSelector(t))
	g.Expect(err).NotTo(HaveOccurred())
	var keys []types.NamespacedName
	for _, ctrl := range controllers {
		keys = append(keys, ctrl.Key)
	}
	want := make([]types.NamespacedName, 0, len(m.CAPI.Providers))
	for _, p := range m.CAPI.Providers {
		want = append(want, types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment})
	}
	g.Expect(keys).To(ConsistOf(want), "every provider Deployment is a controller")

	excluded, err := quiesce.SelectControllers(ctx, c, providerSelector(t), coreKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(excluded).To(HaveLen(len(want)-1), "an excluded Deployment (the operator's own) is never selected")

	webhooksBefore := webhookState(ctx, g, c)

	recorded, err := quiesce.Record(ctx, c, controllers)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range recorded {
		wantReplicas := int32(1)
		if r.Key == coreKey {
			wantReplicas = 2
		}
		g.Expect(r.Recorded).To(Equal(ptr.To(wantReplicas)), "recorded replicas of %s", r.Key)
	}

	wh, err := quiesce.FindWebhooks(ctx, c, controllers)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wh.ByURL).To(BeEmpty())
	g.Expect(wh.Served).NotTo(BeEmpty())
	served := map[string]bool{}
	for _, w := range wh.Served {
		served[w.Configuration] = true
	}
	g.Expect(served).To(HaveKey("capi-validating-webhook-configuration"), "the core provider's webhooks map to its Deployment through their Service")

	t.Cleanup(func() {
		// Leave the cluster as found for the other tests, whatever happened.
		ctx := context.Background()
		_ = quiesce.RemoveBypass(ctx, c)
		_, _ = quiesce.Restore(ctx, c, controllers, 1)
		scale(ctx, NewWithT(t), c, coreKey, 1)
		_ = quiesce.Forget(ctx, c, controllers)
	})

	// The operator has an identity of its own; the test writes as admin.
	opConfig, _, err := m.AddUser("quiesce-operator")
	g.Expect(err).NotTo(HaveOccurred())
	op, err := client.New(opConfig, client.Options{Scheme: c.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	who, err := identity.WhoAmI(ctx, op)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(who.Username).To(Equal("quiesce-operator"))
	g.Expect(who.Shared()).To(BeTrue(), "a certificate user is not a ServiceAccount: others may use it")

	written, err := quiesce.InstallBypass(ctx, op, wh.Served, who.Username)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(ContainElement("ValidatingWebhookConfiguration capi-validating-webhook-configuration"))
	installed := webhookState(ctx, g, c)
	g.Expect(quiesce.InstallBypass(ctx, op, wh.Served, who.Username)).To(BeEmpty(), "installing the bypass twice writes nothing")
	g.Expect(webhookState(ctx, g, c)).To(Equal(installed), "installing the bypass twice changes nothing")
	g.Expect(installed).NotTo(Equal(webhooksBefore))

	g.Expect(quiesce.ScaleDown(ctx, c, recorded)).To(Succeed())
	g.Eventually(func() (map[types.NamespacedName]int, error) {
		return quiesce.RunningPods(ctx, c, recorded)
	}, time.Minute, 200*time.Millisecond).Should(BeEmpty(), "every controller pod must be gone")
	g.Expect(core.WaitServing(ctx, false)).To(Succeed())

	// A resumed move records again: the zero it set must not be recorded.
	again, err := quiesce.Record(ctx, c, controllers)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range again {
		g.Expect(ptr.Deref(r.Recorded, 0)).To(BeNumerically(">", 0), "%s: a second Record must keep the original count", r.Key)
	}

	ns := testenv.NewNamespace(t, m, "bypass")
	inFlight := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-flight"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	g.Expect(op.Create(ctx, inFlight)).To(Succeed(), "the operator's writes skip the webhooks that are down")
	g.Expect(op.Patch(ctx, inFlight, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`)))).To(Succeed())
	other := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-the-operator"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	err = c.Create(ctx, other)
	g.Expect(err).To(HaveOccurred(), "anyone else's write still meets the webhooks, which are down")
	g.Expect(err.Error()).To(ContainSubstring("connection refused"))

	// The API server's own words name the webhook it failed to call; when
	// the bypass holds it, its configuration is written again (and only
	// that one), so that an API server holding an older build reloads it.
	// (The defaulting webhook is called first, and fails first.)
	failed := quiesce.FailedWebhooks(err)
	g.Expect(failed).To(ConsistOf("default.cluster.cluster.x-k8s.io"))
	refreshed, err := quiesce.RefreshBypass(ctx, op, append(failed, "nobody.example.com"), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refreshed).To(ConsistOf("MutatingWebhookConfiguration capi-mutating-webhook-configuration"))
	marked := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, types.NamespacedName{Name: "capi-mutating-webhook-configuration"}, marked)).To(Succeed())
	g.Expect(marked.Annotations).To(HaveKey(movev1alpha1.BypassRefreshedAnnotation))
	g.Expect(quiesce.RefreshBypass(ctx, op, []string{"nobody.example.com"}, time.Now())).To(BeEmpty(), "a webhook without the bypass is not this move's to reload")
	err = c.Patch(ctx, inFlight, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"c":"d"}}}`)))
	g.Expect(err).To(HaveOccurred(), "anyone else's update of the operator's object meets the webhooks too")
	g.Expect(op.Delete(ctx, inFlight)).To(Succeed(), "a DELETE (object null) passes the condition without error")

	// Meanwhile somebody rotates a caBundle and adds a condition of their own:
	// removing the bypass keeps both.
	validating := firstValidating(g, wh.Served)
	rotated := rotateAndAddCondition(ctx, g, c, validating)
	g.Expect(quiesce.RemoveBypass(ctx, op)).To(Succeed())
	afterRotation := webhookState(ctx, g, c)
	g.Expect(afterRotation[rotated.key]).To(ContainSubstring(rotated.caBundle), "a caBundle rotated meanwhile is kept")
	g.Expect(afterRotation[rotated.key]).To(ContainSubstring("someone-else"), "others' match conditions are kept")
	undoRotation(ctx, g, c, validating)
	if diff := cmp.Diff(webhooksBefore, webhookState(ctx, g, c)); diff != "" {
		t.Fatalf("webhook configurations differ from before the bypass (-before +after):\n%s", diff)
	}
	still, err := quiesce.BypassInstalled(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(still).To(BeEmpty())

	restored, err := quiesce.Restore(ctx, c, again, 1)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range restored {
		if r.Key == coreKey {
			g.Expect(r.Replicas).To(Equal(int32(2)))
		}
	}
	g.Eventually(unavailable(ctx, c, restored), time.Minute, 200*time.Millisecond).Should(BeEmpty(), "every controller must be Available again")
	g.Expect(core.WaitServing(ctx, true)).To(Succeed())
	g.Expect(quiesce.Forget(ctx, c, restored)).To(Succeed())
	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, coreKey, d)).To(Succeed())
	g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation))
	g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
}

// unavailable says which of the controllers are not yet Available, as
// RestoreAndCheck does while it restores them: at their restored count
// already, they are only checked.
func unavailable(ctx context.Context, c client.Client, controllers []quiesce.Controller) func() (map[types.NamespacedName]string, error) {
	return func() (map[types.NamespacedName]string, error) {
		_, waiting, err := quiesce.RestoreAndCheck(ctx, c, controllers, 1)
		return waiting, err
	}
}

func TestRestoreFallsBackWhenTheRecordIsLost(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Target.Client
	p := env.Target.CAPI.Provider(capiprovider.CoreProvider)
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment}
	ctrl := []quiesce.Controller{{Key: key}}
	_, err := quiesce.Record(ctx, c, ctrl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(quiesce.ScaleDown(ctx, c, ctrl)).To(Succeed())
	t.Cleanup(func() { scale(context.Background(), NewWithT(t), c, key, 1) })

	// Somebody drops the annotation meanwhile.
	g.Expect(quiesce.Forget(ctx, c, ctrl)).To(Succeed())
	restored, err := quiesce.Restore(ctx, c, ctrl, 3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(restored[0].Replicas).To(Equal(int32(3)), "without a record, the fallback count applies")
	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, key, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))

	// Restoring again, the record forgotten and the controller running, is
	// a no-op: a resumed move must not apply the fallback over a restored count.
	g.Expect(quiesce.Forget(ctx, c, ctrl)).To(Succeed())
	again, err := quiesce.Restore(ctx, c, ctrl, 5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again[0].Replicas).To(Equal(int32(3)))
	g.Expect(c.Get(ctx, key, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))

	// With the annotation gone but a record kept elsewhere (the
	// MoveOperation status), the record wins over the fallback.
	g.Expect(quiesce.ScaleDown(ctx, c, []quiesce.Controller{{Key: key}})).To(HaveOccurred(), "an unrecorded running controller is not stopped")
	scale(ctx, g, c, key, 0)
	fromStatus, err := quiesce.Restore(ctx, c, []quiesce.Controller{{Key: key, Recorded: ptr.To[int32](2)}}, 5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fromStatus[0].Replicas).To(Equal(int32(2)))
}

func TestScaleDownRefusesAnUnrecordedController(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Target.Client
	p := env.Target.CAPI.Provider(capiprovider.KubeadmBootstrapProvider)
	err := quiesce.ScaleDown(ctx, c, []quiesce.Controller{{Key: types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment}}})
	g.Expect(err).To(MatchError(ContainSubstring("record replicas before scaling down")))
}

func scale(ctx context.Context, g Gomega, c client.Client, key types.NamespacedName, n int32) {
	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, key, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(n)
	g.Expect(c.Patch(ctx, d, patch)).To(Succeed())
}

type rotation struct{ key, caBundle string }

func firstValidating(g Gomega, refs []quiesce.WebhookRef) quiesce.WebhookRef {
	for _, r := range refs {
		if r.Kind == quiesce.Validating {
			return r
		}
	}
	g.Expect(refs).To(ContainElement(HaveField("Kind", quiesce.Validating)), "a provider serves a validating webhook")
	return quiesce.WebhookRef{}
}

// rotateAndAddCondition changes what a certificate rotation and another
// tool would change on the configuration of ref while the bypass is in place.
func rotateAndAddCondition(ctx context.Context, g Gomega, c client.Client, ref quiesce.WebhookRef) rotation {
	g.Expect(ref.Kind).To(Equal(quiesce.Validating), "the test rotates a validating configuration")
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, types.NamespacedName{Name: ref.Configuration}, cfg)).To(Succeed())
	before := cfg.Webhooks[0].ClientConfig.CABundle
	cfg.Webhooks[0].ClientConfig.CABundle = append(append([]byte{}, before...), []byte("\n")...)
	cfg.Webhooks[0].MatchConditions = append(cfg.Webhooks[0].MatchConditions, admissionregistrationv1.MatchCondition{
		Name: "someone-else", Expression: "true",
	})
	g.Expect(c.Update(ctx, cfg)).To(Succeed())
	b, err := json.Marshal(cfg.Webhooks[0].ClientConfig.CABundle)
	g.Expect(err).NotTo(HaveOccurred())
	return rotation{key: "validating/" + ref.Configuration, caBundle: string(b)}
}

func undoRotation(ctx context.Context, g Gomega, c client.Client, ref quiesce.WebhookRef) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Get(ctx, types.NamespacedName{Name: ref.Configuration}, cfg)).To(Succeed())
	w := &cfg.Webhooks[0]
	w.ClientConfig.CABundle = w.ClientConfig.CABundle[:len(w.ClientConfig.CABundle)-1]
	var kept []admissionregistrationv1.MatchCondition
	for _, mc := range w.MatchConditions {
		if mc.Name != "someone-else" {
			kept = append(kept, mc)
		}
	}
	w.MatchConditions = kept
	g.Expect(c.Update(ctx, cfg)).To(Succeed())
}
