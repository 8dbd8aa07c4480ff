//go:build cluster

package capirelease_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/move-operator/move-operator/test/capirelease"
	"github.com/move-operator/move-operator/test/localcluster"
)

var (
	cluster *localcluster.Cluster
	inst    *capirelease.Installation
	cl      client.Client
)

// TestMain starts one local cluster with Cluster API v1.10.9 installed, for
// every test of the package; the logs are kept when a test fails.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	// Nothing of controller-runtime's logs in this process; the managers
	// log to their files.
	ctrllog.SetLogger(logr.Discard())
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	// The binaries first, so that no cluster idles while they build: the
	// first time on a machine that takes minutes (15 on 2 busy cores; give
	// go test -timeout 30m then), later a stat each.
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 30*time.Minute)
	_, built, err := capirelease.Binaries(buildCtx)
	cancelBuild()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building Cluster API %s: %v\n", capirelease.Version, err)
		return 1
	}
	logf("Cluster API %s manager binaries found in %s", capirelease.Version, built.Round(time.Microsecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, err = localcluster.Start(ctx, "v1beta1-source", localcluster.Options{Logf: logf})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local cluster: %v\n", err)
		return 1
	}
	code = 1
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping %s: %v\n", cluster, err)
			code = 1
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "logs of %s kept\n", cluster)
		} else if err := cluster.RemoveLogs(); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
		}
	}()
	inst, err = capirelease.Install(ctx, cluster, capirelease.Options{Logf: logf})
	if err != nil {
		fmt.Fprintf(os.Stderr, "installing Cluster API %s: %v\n", capirelease.Version, err)
		return code
	}
	if cl, err = client.New(cluster.Config, client.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "creating a client: %v\n", err)
		return code
	}
	code = m.Run()
	return code
}

// TestClusterAPIV1_10RunsFromItsReleasedBinaries shows the v1beta1-contract
// release live: its CRDs store v1beta1, v1beta1 objects are admitted through
// its own webhooks (defaulted as only they default) and reconciled by its
// own controllers, and a scale to zero stops a manager and its webhooks as
// in a real cluster.
func TestClusterAPIV1_10RunsFromItsReleasedBinaries(t *testing.T) {
	t.Logf("Cluster API %s: binaries found in %s, installed in %s", inst.Version,
		inst.BuildDuration.Round(time.Microsecond), inst.Duration.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("its CRDs store v1beta1 and convert through its own Services", func(t *testing.T) {
		g := NewWithT(t)
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		g.Expect(cl.List(ctx, crds, client.HasLabels{"cluster.x-k8s.io/provider"})).To(Succeed())
		services := map[string]string{}
		for _, p := range inst.Providers {
			services[p.Namespace+"/"+p.WebhookService] = p.Name
		}
		checked := 0
		for _, crd := range crds.Items {
			if !strings.HasSuffix(crd.Spec.Group, "cluster.x-k8s.io") || crd.Spec.Group == "ipam.cluster.x-k8s.io" ||
				crd.Spec.Group == "runtime.cluster.x-k8s.io" {
				continue // ipam and runtime kinds have no v1beta1 storage in v1.10
			}
			storage := ""
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					storage = v.Name
				}
			}
			g.Expect(storage).To(Equal("v1beta1"), "storage version of %s", crd.Name)
			g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta1"}), "stored versions of %s", crd.Name)
			g.Expect(crd.Spec.Conversion).NotTo(BeNil(), crd.Name)
			g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter), crd.Name)
			svc := crd.Spec.Conversion.Webhook.ClientConfig.Service
			g.Expect(services).To(HaveKey(svc.Namespace+"/"+svc.Name), "conversion Service of %s", crd.Name)
			g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).NotTo(BeEmpty(), crd.Name)
			checked++
		}
		// Core 9 (Cluster, ClusterClass, Machine, MachineSet,
		// MachineDeployment, MachinePool, MachineHealthCheck,
		// MachineDrainRule, ClusterResourceSet and its binding: 10), kubeadm
		// bootstrap 2, kubeadm control plane 2.
		g.Expect(checked).To(BeNumerically(">=", 14), "Cluster API CRDs found")
	})

	ns := newNamespace(t, "v1beta1")
	objs := fleetObjects(t, ns)

	t.Run("v1beta1 objects are admitted and defaulted by its webhooks", func(t *testing.T) {
		g := NewWithT(t)
		for _, o := range objs {
			g.Expect(cl.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
		}
		c := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "Cluster", "v1beta1")
		// The Cluster webhook defaults the namespace of its references.
		g.Expect(field(c, "spec", "infrastructureRef", "namespace")).To(Equal(ns))

		kcp := get(g, ctx, ns, "controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane", "v1beta1-cp")
		// The KubeadmControlPlane webhook prefixes the version with "v" and
		// defaults the rollout and the bootstrap format.
		g.Expect(field(kcp, "spec", "version")).To(Equal("v1.32.0"))
		g.Expect(field(kcp, "spec", "rolloutStrategy", "type")).To(Equal("RollingUpdate"))
		g.Expect(field(kcp, "spec", "kubeadmConfigSpec", "format")).To(Equal("cloud-config"))

		kct := get(g, ctx, ns, "bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", "v1beta1-md")
		g.Expect(field(kct, "spec", "template", "spec", "format")).To(Equal("cloud-config"))

		md := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "MachineDeployment", "v1beta1-md")
		// progressDeadlineSeconds exists only in v1beta1: the v1.10
		// webhook defaults it.
		g.Expect(field(md, "spec", "progressDeadlineSeconds")).To(Equal(int64(600)))
		g.Expect(md.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "v1beta1"))
		g.Expect(field(md, "spec", "selector", "matchLabels")).To(
			HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "v1beta1"))
	})

	t.Run("its controllers reconcile them", func(t *testing.T) {
		g := NewWithT(t)
		// Leader election: a manager reconciles once it holds its Lease.
		g.Eventually(func(g Gomega) {
			c := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "Cluster", "v1beta1")
			g.Expect(c.GetFinalizers()).To(ContainElement("cluster.cluster.x-k8s.io"))
			g.Expect(field(c, "status", "phase")).To(Equal("Provisioning"))
			g.Expect(field(c, "status", "observedGeneration")).To(Equal(c.GetGeneration()))
		}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(),
			"the core manager adds its finalizer and sets the phase (log: %s)", inst.Provider(capirelease.CoreProvider).LogPath)
		g.Eventually(func(g Gomega) {
			kcp := get(g, ctx, ns, "controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane", "v1beta1-cp")
			// The core manager makes the Cluster its owner, then the
			// control plane manager adds its finalizer.
			g.Expect(kcp.GetOwnerReferences()).To(ContainElement(HaveField("Kind", "Cluster")))
			g.Expect(kcp.GetFinalizers()).To(ContainElement("kubeadm.controlplane.cluster.x-k8s.io"))
		}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(),
			"the control plane manager reconciles (log: %s)", inst.Provider(capirelease.KubeadmControlPlaneProvider).LogPath)
		g.Eventually(func(g Gomega) {
			md := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "MachineDeployment", "v1beta1-md")
			g.Expect(md.GetOwnerReferences()).To(ContainElement(HaveField("Kind", "Cluster")))
			sets := &unstructured.UnstructuredList{}
			sets.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachineSetList"})
			g.Expect(cl.List(ctx, sets, client.InNamespace(ns))).To(Succeed())
			g.Expect(sets.Items).To(HaveLen(1))
		}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(),
			"the core manager makes the MachineDeployment's MachineSet")
	})

	t.Run("scaled to zero its manager stops and its webhooks refuse; scaled back they serve again", func(t *testing.T) {
		g := NewWithT(t)
		core := inst.Provider(capirelease.CoreProvider)
		runsBefore := len(core.Runs())
		began := time.Now()
		scale(g, ctx, core.Namespace, core.Deployment, 0)
		g.Expect(core.WaitServing(ctx, false)).To(Succeed())
		refusedAfter := time.Since(began)
		g.Expect(core.WaitRunning(ctx, false)).To(Succeed())
		stoppedAfter := time.Since(began)
		last := core.Runs()[len(core.Runs())-1]
		g.Expect(last.Killed).To(BeFalse(), "the manager exits within its grace period on SIGTERM")
		g.Expect(last.Err).NotTo(HaveOccurred(), "the manager exits cleanly on SIGTERM (log: %s)", core.LogPath)

		// The API server dials the ClusterIP and finds nothing there.
		g.Eventually(func() error {
			return cl.Create(ctx, machineHealthCheck(ns, "refused"))
		}).WithTimeout(10 * time.Second).Should(MatchError(And(
			ContainSubstring("failed calling webhook"), ContainSubstring("connect: connection refused"))))

		began = time.Now()
		scale(g, ctx, core.Namespace, core.Deployment, 1)
		g.Expect(core.WaitServing(ctx, true)).To(Succeed())
		servingAfter := time.Since(began)
		g.Expect(core.Runs()).To(HaveLen(runsBefore + 1))
		g.Expect(cl.Create(ctx, machineHealthCheck(ns, "admitted"))).To(Succeed())
		t.Logf("core manager: webhooks refused %s after the scale to zero, process gone after %s (grace 10s); serving again %s after the scale to one",
			refusedAfter.Round(time.Millisecond), stoppedAfter.Round(time.Millisecond), servingAfter.Round(time.Millisecond))
	})
}

// field is the value at a path of o, nil if there is none.
func field(o *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	return v
}

func get(g Gomega, ctx context.Context, ns, apiVersion, kind, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)).To(Succeed(), "getting %s %s/%s", kind, ns, name)
	return o
}

func scale(g Gomega, ctx context.Context, ns, name string, replicas int32) {
	d := &appsv1.Deployment{}
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(replicas)
	g.Expect(cl.Patch(ctx, d, patch)).To(Succeed())
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	if err := cl.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		if err := cl.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// stubInfrastructureCRDs are the least infrastructure kinds a v1beta1
// fleet needs: a cluster, a machine and a machine template kind of the
// v1beta1 contract (the CRD label cluster.x-k8s.io/v1beta1 names the
// versions Cluster API may use), with no controller.
func stubInfrastructureCRDs() []*apiextensionsv1.CustomResourceDefinition {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"StubCluster", "StubMachine", "StubMachineTemplate"} {
		plural := strings.ToLower(kind) + "s"
		crds = append(crds, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{
				Name:   plural + ".infrastructure.cluster.x-k8s.io",
				Labels: map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1"},
			},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "infrastructure.cluster.x-k8s.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1alpha1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true),
					}},
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				}},
			},
		})
	}
	return crds
}

// fleetObjects installs the stub infrastructure kinds (once) and returns a
// v1beta1 Cluster "v1beta1" with a KubeadmControlPlane and a
// MachineDeployment, and what they refer to, undefaulted.
func fleetObjects(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	for _, crd := range stubInfrastructureCRDs() {
		if err := cl.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating CRD %s: %v", crd.Name, err)
		}
		g.Eventually(func(g Gomega) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
			g.Expect(got.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	manifests := `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: StubCluster
metadata: {name: v1beta1}
spec: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: StubMachineTemplate
metadata: {name: v1beta1-cp}
spec: {template: {spec: {}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: StubMachineTemplate
metadata: {name: v1beta1-md}
spec: {template: {spec: {}}}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfigTemplate
metadata: {name: v1beta1-md}
spec: {template: {spec: {}}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata: {name: v1beta1-cp}
spec:
  replicas: 1
  version: "1.32.0"
  machineTemplate:
    infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: StubMachineTemplate, name: v1beta1-cp}
  kubeadmConfigSpec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: v1beta1}
spec:
  clusterNetwork: {pods: {cidrBlocks: [192.168.0.0/16]}}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: StubCluster, name: v1beta1}
  controlPlaneRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlane, name: v1beta1-cp}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: v1beta1-md}
spec:
  clusterName: v1beta1
  replicas: 1
  selector: {}
  template:
    spec:
      clusterName: v1beta1
      version: v1.32.0
      bootstrap:
        configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: KubeadmConfigTemplate, name: v1beta1-md}
      infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: StubMachineTemplate, name: v1beta1-md}
`
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifests, "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatalf("parsing %q: %v", doc, err)
		}
		o.SetNamespace(ns)
		objs = append(objs, o)
	}
	return objs
}

// machineHealthCheck is a v1beta1 MachineHealthCheck of the Cluster
// "v1beta1", which only the core provider's webhooks admit.
func machineHealthCheck(ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("cluster.x-k8s.io/v1beta1")
	o.SetKind("MachineHealthCheck")
	o.SetNamespace(ns)
	o.SetName(name)
	_ = unstructured.SetNestedField(o.Object, "v1beta1", "spec", "clusterName")
	_ = unstructured.SetNestedStringMap(o.Object, map[string]string{"pool": name}, "spec", "selector", "matchLabels")
	return o
}
