//go:build cluster

package capiprovider_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CAPI: true}, &env)
}

// TestTwoManagementClustersWithClusterAPIStartInUnderThirtySeconds reports
// the startup figure of this package's pair. Other test binaries may be
// starting clusters on the same two cores at the same time; when the machine
// is that overcommitted the figure is reported but not held against the bound.
func TestTwoManagementClustersWithClusterAPIStartInUnderThirtySeconds(t *testing.T) {
	load := loadAverage()
	t.Logf("two local management clusters with Cluster API installed in %s (source %s + install %s, target %s + install %s; load average %.1f on %d CPUs)",
		env.StartupDuration.Round(time.Millisecond),
		env.Source.StartupDuration.Round(time.Millisecond), env.Source.CAPI.Duration.Round(time.Millisecond),
		env.Target.StartupDuration.Round(time.Millisecond), env.Target.CAPI.Duration.Round(time.Millisecond),
		load, runtime.NumCPU())
	if env.StartupDuration <= 30*time.Second {
		return
	}
	if load > float64(2*runtime.NumCPU()) {
		t.Skipf("startup took %s, over 30s, while the machine was overcommitted by other work: not a fair measure", env.StartupDuration)
	}
	t.Errorf("startup took %s, want under 30s", env.StartupDuration)
}

func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

// The names a real `clusterctl init` gives these providers' objects.
var wantProviders = []struct {
	name, namespace, deployment, service string
	typ                                  clusterctlv1.ProviderType
}{
	{capiprovider.CoreProvider, "capi-system", "capi-controller-manager", "capi-webhook-service", clusterctlv1.CoreProviderType},
	{capiprovider.KubeadmBootstrapProvider, "capi-kubeadm-bootstrap-system", "capi-kubeadm-bootstrap-controller-manager", "capi-kubeadm-bootstrap-webhook-service", clusterctlv1.BootstrapProviderType},
	{capiprovider.KubeadmControlPlaneProvider, "capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-controller-manager", "capi-kubeadm-control-plane-webhook-service", clusterctlv1.ControlPlaneProviderType},
	{capiprovider.LoopInfrastructureProvider, "capl-system", "capl-controller-manager", "capl-webhook-service", clusterctlv1.InfrastructureProviderType},
}

func TestTheSetupLooksAsClusterctlInitLeavesIt(t *testing.T) {
	ctx := context.Background()
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		t.Run(m.Name, func(t *testing.T) {
			for _, want := range wantProviders {
				t.Run(want.name+" has its namespace, Deployment, Service, ServiceAccount and inventory entry", func(t *testing.T) {
					g := NewWithT(t)
					p := m.CAPI.Provider(want.name)
					g.Expect(p).NotTo(BeNil())
					g.Expect([]string{p.Namespace, p.Deployment, p.WebhookService}).To(Equal([]string{want.namespace, want.deployment, want.service}))

					d := &appsv1.Deployment{}
					g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: want.namespace, Name: want.deployment}, d)).To(Succeed())
					g.Expect(d.Labels).To(HaveKeyWithValue(capiprovider.ProviderLabel, want.name))
					g.Expect(d.Labels).To(HaveKey(clusterctlv1.ClusterctlLabel))
					g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(capiprovider.ProviderLabel, want.name))

					svc := &corev1.Service{}
					g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: want.namespace, Name: want.service}, svc)).To(Succeed())
					g.Expect(svc.Spec.ClusterIP).To(Equal(p.ClusterIP))
					g.Expect(svc.Spec.ClusterIP).To(HavePrefix(strings.TrimSuffix(m.ServiceCIDR(), "0/24")))
					g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(capiprovider.ProviderLabel, want.name))
					for k, v := range svc.Spec.Selector {
						g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(k, v), "the webhook Service must select the Deployment's pods")
					}

					prefix := strings.TrimSuffix(want.service, "webhook-service")
					g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: want.namespace, Name: prefix + "manager"}, &corev1.ServiceAccount{})).To(Succeed())
					g.Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal(prefix + "manager"))

					inventory := &clusterctlv1.Provider{}
					g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: want.namespace, Name: want.name}, inventory)).To(Succeed())
					g.Expect(inventory.Type).To(Equal(string(want.typ)))
					g.Expect(inventory.ManifestLabel()).To(Equal(want.name))
					g.Expect(inventory.Version).To(HavePrefix("v"))
				})
			}

			t.Run("every provider CRD carries clusterctl's labels and its conversion points at its provider", func(t *testing.T) {
				g := NewWithT(t)
				crds := &apiextensionsv1.CustomResourceDefinitionList{}
				g.Expect(m.Client.List(ctx, crds)).To(Succeed())
				services := map[string]string{}
				for _, want := range wantProviders {
					services[want.name] = want.namespace + "/" + want.service
				}
				seen := map[string]int{}
				for _, crd := range crds.Items {
					if crd.Name == "providers.clusterctl.cluster.x-k8s.io" {
						g.Expect(crd.Labels).To(Equal(map[string]string{clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue}))
						continue
					}
					if !strings.HasSuffix(crd.Spec.Group, "cluster.x-k8s.io") {
						continue
					}
					provider := crd.Labels[capiprovider.ProviderLabel]
					g.Expect(services).To(HaveKey(provider), "CRD %s", crd.Name)
					g.Expect(crd.Labels).To(HaveKey(clusterctlv1.ClusterctlLabel), "CRD %s", crd.Name)
					seen[provider]++
					if len(crd.Spec.Versions) > 1 {
						g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter), "CRD %s", crd.Name)
						svc := crd.Spec.Conversion.Webhook.ClientConfig.Service
						g.Expect(svc.Namespace+"/"+svc.Name).To(Equal(services[provider]), "CRD %s", crd.Name)
						g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).NotTo(BeEmpty(), "CRD %s", crd.Name)
					}
				}
				g.Expect(seen).To(HaveLen(4))
			})

			t.Run("every webhook is service-based, failurePolicy Fail, with a CA bundle", func(t *testing.T) {
				g := NewWithT(t)
				type hook struct {
					cfg, name, service string
					policy             *admissionregistrationv1.FailurePolicyType
					caBundle           []byte
				}
				var hooks []hook
				mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
				g.Expect(m.Client.List(ctx, mutating, client.HasLabels{clusterctlv1.ClusterctlLabel})).To(Succeed())
				for _, c := range mutating.Items {
					for _, w := range c.Webhooks {
						g.Expect(w.ClientConfig.URL).To(BeNil())
						hooks = append(hooks, hook{c.Name, w.Name, w.ClientConfig.Service.Namespace + "/" + w.ClientConfig.Service.Name, w.FailurePolicy, w.ClientConfig.CABundle})
					}
				}
				validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
				g.Expect(m.Client.List(ctx, validating, client.HasLabels{clusterctlv1.ClusterctlLabel})).To(Succeed())
				for _, c := range validating.Items {
					for _, w := range c.Webhooks {
						g.Expect(w.ClientConfig.URL).To(BeNil())
						hooks = append(hooks, hook{c.Name, w.Name, w.ClientConfig.Service.Namespace + "/" + w.ClientConfig.Service.Name, w.FailurePolicy, w.ClientConfig.CABundle})
					}
				}
				g.Expect(len(mutating.Items)+len(validating.Items)).To(Equal(7), "core, bootstrap and control plane have both kinds, loop only a validating one")
				for _, h := range hooks {
					g.Expect(*h.policy).To(Equal(admissionregistrationv1.Fail), "%s/%s", h.cfg, h.name)
					g.Expect(h.caBundle).NotTo(BeEmpty(), "%s/%s", h.cfg, h.name)
					found := false
					for _, want := range wantProviders {
						found = found || h.service == want.namespace+"/"+want.service
					}
					g.Expect(found).To(BeTrue(), "%s/%s calls %s", h.cfg, h.name, h.service)
				}
			})
		})
	}
}

// objectOf returns a valid new object of one of the provider's kinds, to be
// created through its webhooks.
var objectOf = map[string]func(ns string) client.Object{
	capiprovider.CoreProvider: func(ns string) client.Object {
		return &addonsv1.ClusterResourceSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crs-" + rand.String(5)},
			Spec: addonsv1.ClusterResourceSetSpec{
				ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"cni": "loop"}},
				Resources:       []addonsv1.ResourceRef{{Kind: "ConfigMap", Name: "cni"}},
			},
		}
	},
	capiprovider.KubeadmBootstrapProvider: func(ns string) client.Object {
		return &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kct-" + rand.String(5)}}
	},
	capiprovider.KubeadmControlPlaneProvider: func(ns string) client.Object {
		return &controlplanev1.KubeadmControlPlaneTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kcpt-" + rand.String(5)}}
	},
	capiprovider.LoopInfrastructureProvider: func(ns string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(capiprovider.LoopGroupVersion.WithKind(capiprovider.LoopMachineTemplateKind))
		u.SetNamespace(ns)
		u.SetName("lmt-" + rand.String(5))
		_ = unstructured.SetNestedField(u.Object, "small", "spec", "template", "spec", "flavor")
		return u
	},
}

func scale(ctx context.Context, g Gomega, m *testenv.Management, p *capiprovider.Provider, replicas int32) {
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Deployment}, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	g.Expect(m.Client.Patch(ctx, d, patch)).To(Succeed())
}

func TestWebhooksAreReachableOnlyWhileTheProviderDeploymentHasReadyPods(t *testing.T) {
	ctx := context.Background()
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		ns := testenv.NewNamespace(t, m, "webhooks")
		for _, p := range m.CAPI.Providers {
			t.Run(m.Name+"/"+p.Name, func(t *testing.T) {
				g := NewWithT(t)
				t.Cleanup(func() { scale(ctx, NewWithT(t), m, p, 1) })

				g.Expect(m.Client.Create(ctx, objectOf[p.Name](ns))).To(Succeed(), "a create should pass the webhooks of a running provider")

				began := time.Now()
				scale(ctx, g, m, p, 0)
				waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				g.Expect(p.WaitServing(waitCtx, false)).To(Succeed())
				t.Logf("webhooks down %s after scaling to zero", time.Since(began).Round(time.Millisecond))

				err := m.Client.Create(ctx, objectOf[p.Name](ns))
				g.Expect(err).To(MatchError(ContainSubstring("failed calling webhook")))
				g.Expect(err).To(MatchError(ContainSubstring("connect: connection refused")),
					"a provider scaled to zero should fail creates the way a real cluster does")

				began = time.Now()
				scale(ctx, g, m, p, 1)
				g.Expect(p.WaitServing(waitCtx, true)).To(Succeed())
				t.Logf("webhooks up %s after scaling to one", time.Since(began).Round(time.Millisecond))
				g.Expect(m.Client.Create(ctx, objectOf[p.Name](ns))).To(Succeed(), "a create should pass again once the provider is back")
			})
		}
	}
}

func TestConversionWebhooksFollowTheProviderDeployment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := env.Source
	ns := testenv.NewNamespace(t, m, "conversion")
	crs := objectOf[capiprovider.CoreProvider](ns)
	g.Expect(m.Client.Create(ctx, crs)).To(Succeed())

	// Reading a version other than the storage version makes the API server
	// call the CRD's conversion webhook.
	old := &unstructured.Unstructured{}
	old.SetAPIVersion("addons.cluster.x-k8s.io/v1beta1")
	old.SetKind("ClusterResourceSet")
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(crs), old)).To(Succeed())
	g.Expect(old.GetAPIVersion()).To(Equal("addons.cluster.x-k8s.io/v1beta1"))

	core := m.CAPI.Provider(capiprovider.CoreProvider)
	t.Cleanup(func() { scale(ctx, NewWithT(t), m, core, 1) })
	scale(ctx, g, m, core, 0)
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	g.Expect(core.WaitServing(waitCtx, false)).To(Succeed())
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(crs), old)).To(MatchError(ContainSubstring("conversion webhook")))

	// Asked to, the harness serves conversion while the provider is
	// stopped, and still refuses its admission webhooks (the bench's
	// stand-in for controllers that stop while conversion serves).
	t.Cleanup(func() { NewWithT(t).Expect(m.CAPI.SetConversionWhileStopped(false)).To(Succeed()) })
	g.Expect(m.CAPI.SetConversionWhileStopped(true)).To(Succeed())
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(crs), old)).To(Succeed(), "conversion should be served while the provider is stopped")
	g.Expect(old.GetAPIVersion()).To(Equal("addons.cluster.x-k8s.io/v1beta1"))
	g.Expect(core.Serving()).To(BeFalse(), "the admission webhooks of a stopped provider are not served")
	err := m.Client.Create(ctx, objectOf[capiprovider.CoreProvider](ns))
	g.Expect(err).To(MatchError(ContainSubstring("failed calling webhook")), "admission should still be refused while the provider is stopped")
	g.Expect(m.CAPI.SetConversionWhileStopped(false)).To(Succeed())
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(crs), old)).To(MatchError(ContainSubstring("conversion webhook")))

	scale(ctx, g, m, core, 1)
	g.Expect(core.WaitServing(waitCtx, true)).To(Succeed())
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(crs), old)).To(Succeed())
}
