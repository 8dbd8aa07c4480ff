//go:build cluster

package capirelease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capirelease"
	"github.com/move-operator/move-operator/test/workload"
)

// TestAV1_10FleetProvisionedOnTheLoopProviderComesUpAndSettles lets Cluster
// API v1.10.9's released managers and the loop provider (v1beta1 contract)
// provision two workload clusters from nothing, a classic one and one of a
// ClusterClass (its topology controller makes the control plane and the
// MachineDeployment), each a KubeadmControlPlane of one and a
// MachineDeployment of one, whose Nodes register in a workload API server
// as kubelets would; both become Available, and then their controllers
// leave them alone: no Machine is made again. It is the source a move
// across contracts starts from, as an older management cluster holds it:
// every object written by the older release's own controllers.
func TestAV1_10FleetProvisionedOnTheLoopProviderComesUpAndSettles(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	vms := startLoopProvider(t, ctx)
	w, err := workload.Start(ctx, workload.Options{Logf: t.Logf})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Errorf("stopping the workload API server: %v", err)
		}
	})

	ns := newNamespace(t, "fleet")
	shapes := map[string]capirelease.Shape{"older": capirelease.Classic, "older-cc": capirelease.Topology}
	for name, shape := range shapes {
		objs, err := capirelease.Fleet(w, ns, name, shape)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(capirelease.CreateFleet(ctx, cl, objs)).To(Succeed())
	}
	kubeletsCtx, stopKubelets := context.WithCancel(ctx)
	kubeletsDone := make(chan struct{})
	go func() {
		defer close(kubeletsDone)
		capirelease.ActAsKubelets(kubeletsCtx, cl, w, ns, t.Logf)
	}()
	t.Cleanup(func() { stopKubelets(); <-kubeletsDone })

	logs := fmt.Sprintf("logs: %s, %s, %s", inst.Provider("cluster-api").LogPath,
		inst.Provider("control-plane-kubeadm").LogPath, inst.Provider("bootstrap-kubeadm").LogPath)
	g.Eventually(func(g Gomega) {
		for name := range shapes {
			c := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "Cluster", name)
			g.Expect(v1beta2Condition(c, "Available")).To(Equal("True"), "the Available condition of Cluster %s: %v", name, field(c, "status", "v1beta2", "conditions"))
		}
		machines := listMachines(g, ctx, ns)
		g.Expect(machines).To(HaveLen(2 * len(shapes)))
		for _, m := range machines {
			g.Expect(field(&m, "status", "phase")).To(Equal("Running"), m.GetName())
			g.Expect(field(&m, "status", "nodeRef", "name")).To(Equal(m.GetName()), m.GetName())
		}
		kcps := &unstructured.UnstructuredList{}
		kcps.SetAPIVersion("controlplane.cluster.x-k8s.io/v1beta1")
		kcps.SetKind("KubeadmControlPlaneList")
		g.Expect(cl.List(ctx, kcps, client.InNamespace(ns))).To(Succeed())
		g.Expect(kcps.Items).To(HaveLen(len(shapes)))
		for _, kcp := range kcps.Items {
			// Not readyReplicas: v1.10 counts the control-plane Nodes of
			// the workload cluster, and the clusters here share one API
			// server (package workload).
			g.Expect(field(&kcp, "status", "ready")).To(Equal(true), kcp.GetName())
		}
	}).WithTimeout(4*time.Minute).WithPolling(time.Second).Should(Succeed(), logs)

	made := map[types.UID]string{}
	for _, m := range listMachines(g, ctx, ns) {
		made[m.GetUID()] = m.GetName()
	}
	vmsBefore := len(vms.VMs())
	g.Consistently(func(g Gomega) {
		now := map[types.UID]string{}
		for _, m := range listMachines(g, ctx, ns) {
			now[m.GetUID()] = m.GetName()
		}
		g.Expect(now).To(Equal(made), "no Machine made again or deleted")
		g.Expect(vms.VMs()).To(HaveLen(vmsBefore), "no VM created or deleted")
		for name := range shapes {
			c := get(g, ctx, ns, "cluster.x-k8s.io/v1beta1", "Cluster", name)
			g.Expect(v1beta2Condition(c, "Available")).To(Equal("True"), name)
		}
	}).WithTimeout(20*time.Second).WithPolling(2*time.Second).Should(Succeed(), logs)
	t.Logf("Cluster API %s: a classic cluster and one of a ClusterClass Available on %d Machines (%d VMs) and settled", inst.Version, len(made), vmsBefore)
}

// listMachines lists the v1beta1 Machines of ns.
func listMachines(g Gomega, ctx context.Context, ns string) []unstructured.Unstructured {
	machines := &unstructured.UnstructuredList{}
	machines.SetAPIVersion("cluster.x-k8s.io/v1beta1")
	machines.SetKind("MachineList")
	g.Expect(cl.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
	return machines.Items
}

// v1beta2Condition is the status of a v1beta2 condition a v1.10 object
// reports (status.v1beta2.conditions), empty if absent.
func v1beta2Condition(o *unstructured.Unstructured, conditionType string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "v1beta2", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == conditionType {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
