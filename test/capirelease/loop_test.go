//go:build cluster

package capirelease_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// TestTheLoopProviderProvisionsForClusterAPIV1_10UnderTheV1beta1Contract
// runs the loop infrastructure provider under the v1beta1 contract beside
// Cluster API v1.10.9's released managers, and lets them provision a
// control plane Machine from nothing: the core manager reads the
// LoopCluster's status.ready (the CRDs carry the cluster.x-k8s.io/v1beta1
// contract label), the control plane manager creates the Machine, its
// KubeadmConfig and LoopMachine, the bootstrap manager writes the bootstrap
// data, and the loop provider, reading Machines and Clusters at v1beta1,
// creates the VM and reports it. Without the provider's v1beta1 contract
// it cannot even watch a Machine: v1.10 serves no v1beta2.
func TestTheLoopProviderProvisionsForClusterAPIV1_10UnderTheV1beta1Contract(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	vms := startLoopProvider(t, ctx)

	ns := newNamespace(t, "loop")
	for _, o := range loopFleet(t, ns) {
		g.Expect(cl.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
	}

	g.Eventually(func(g Gomega) {
		c := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "Cluster", "loop")
		g.Expect(field(c, "status", "infrastructureReady")).To(Equal(true),
			"the core manager read the LoopCluster's status.ready")
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	lc := get(g, ctx, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", "LoopCluster", "loop")
	g.Expect(lc.GetFinalizers()).To(ContainElement(loopprovider.ClusterFinalizer))
	g.Expect(field(lc, "status", "initialization", "provisioned")).To(Equal(true), "both contracts' fields are reported")

	var machine *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		machines := &unstructured.UnstructuredList{}
		machines.SetAPIVersion("cluster.x-k8s.io/v1beta1")
		machines.SetKind("MachineList")
		g.Expect(cl.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1), "the control plane manager made one Machine")
		machine = &machines.Items[0]
		g.Expect(field(machine, "status", "bootstrapReady")).To(Equal(true), "the bootstrap manager wrote its data")
		g.Expect(field(machine, "status", "infrastructureReady")).To(Equal(true), "the core manager read the LoopMachine's status.ready")
		g.Expect(field(machine, "spec", "providerID")).To(HavePrefix(loopprovider.ProviderIDPrefix))
		g.Expect(field(machine, "status", "phase")).To(Equal("Provisioned"))
	}).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(),
		"logs: %s, %s", inst.Provider("cluster-api").LogPath, inst.Provider("control-plane-kubeadm").LogPath)

	infraRef, _, _ := unstructured.NestedString(machine.Object, "spec", "infrastructureRef", "name")
	lm := get(g, ctx, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", "LoopMachine", infraRef)
	providerID, _ := field(lm, "spec", "providerID").(string)
	g.Expect(field(machine, "spec", "providerID")).To(Equal(providerID), "the Machine took the LoopMachine's providerID")
	found := vms.FindVMs(strings.TrimPrefix(providerID, loopprovider.ProviderIDPrefix))
	g.Expect(found).To(HaveLen(1), "the VM the loop provider created")
	g.Expect(found[0].Power).To(Equal(cloud.PoweredOn))
	t.Logf("Cluster API %s provisioned Machine %s on the loop provider's VM %s (v1beta1 contract)", inst.Version, machine.GetName(), found[0].ID)
}

// loopCRDs installs the loop provider's CRDs once for the package.
var (
	loopCRDs    sync.Once
	loopCRDsErr error
)

// startLoopProvider installs the loop provider's CRDs (once) and runs its
// controllers under the v1beta1 contract, in this process, until the test
// ends; it returns their cloud.
func startLoopProvider(t *testing.T, ctx context.Context) *cloud.Cloud {
	t.Helper()
	g := NewWithT(t)
	loopCRDs.Do(func() {
		crds, err := capiprovider.LoopCRDs()
		if err == nil {
			for _, crd := range crds {
				g.Expect(crd.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1alpha1"), crd.GetName())
			}
			err = capiprovider.ApplyInPhases(ctx, cl, crds)
		}
		loopCRDsErr = err
	})
	g.Expect(loopCRDsErr).NotTo(HaveOccurred(), "installing the loop provider's CRDs")

	vms := cloud.New()
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:                 loopprovider.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loopprovider.SetupWithManager(ctx, mgr, loopprovider.Options{
		Cloud: vms, ManagementCluster: cluster.Name, Contract: loopprovider.ContractV1Beta1,
	}, controller.Options{SkipNameValidation: ptr.To(true)})).To(Succeed())
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stopMgr()
		if err := <-mgrDone; err != nil {
			t.Errorf("the loop provider's manager: %v", err)
		}
	})
	return vms
}

// loopFleet is a v1beta1 Cluster "loop" on the loop provider, with a
// KubeadmControlPlane of one replica and no Machine yet.
func loopFleet(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	manifests := `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: LoopCluster
metadata: {name: loop}
spec: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: LoopMachineTemplate
metadata: {name: loop-cp}
spec: {template: {spec: {flavor: small}}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata: {name: loop-cp}
spec:
  replicas: 1
  version: v1.32.0
  machineTemplate:
    infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopMachineTemplate, name: loop-cp}
  kubeadmConfigSpec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: loop}
spec:
  clusterNetwork: {pods: {cidrBlocks: [192.168.0.0/16]}}
  controlPlaneEndpoint: {host: 127.0.0.1, port: 6443}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopCluster, name: loop}
  controlPlaneRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlane, name: loop-cp}
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
