//go:build cluster

package livecontrollers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/testenv"
)

func scale(ctx context.Context, g Gomega, m *testenv.Management, p *capiprovider.Provider, replicas int32) {
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Deployment}, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	g.Expect(m.Client.Patch(ctx, d, patch)).To(Succeed())
}

// scaleAndWait scales a provider and waits until its controllers follow.
func scaleAndWait(t *testing.T, m *testenv.Management, p *capiprovider.Provider, replicas int32) {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	began := time.Now()
	scale(ctx, g, m, p, replicas)
	g.Expect(p.WaitControllers(ctx, replicas > 0)).To(Succeed())
	t.Logf("%s: controllers of %s running=%t %s after scaling to %d", m.Name, p.Name, replicas > 0, time.Since(began).Round(time.Millisecond), replicas)
}

// restore brings a provider back to one replica, serving and reconciling.
func restore(t *testing.T, m *testenv.Management, p *capiprovider.Provider) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	scale(ctx, g, m, p, 1)
	g.Expect(p.WaitServing(ctx, true)).To(Succeed())
	g.Expect(p.WaitControllers(ctx, true)).To(Succeed())
}

func newLoop(kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(loopprovider.GroupVersion.WithKind(kind))
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// newCluster returns a Cluster whose infrastructure is a LoopCluster of the
// same name.
func newCluster(ns, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: loopprovider.GroupVersion.Group, Kind: loopprovider.ClusterKind, Name: name,
			},
		},
	}
}

func TestEveryProviderRunsItsControllersInBothClusters(t *testing.T) {
	g := NewWithT(t)
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		for _, p := range m.CAPI.Providers {
			g.Expect(p.ControllersRunning()).To(BeTrue(), "%s: %s", m.Name, p.Name)
			runs := p.Runs()
			g.Expect(runs).NotTo(BeEmpty(), "%s: %s", m.Name, p.Name)
			g.Expect(runs[0].Err).NotTo(HaveOccurred(), "%s: %s", m.Name, p.Name)
		}
	}
}

// TestAProvidersControllersStopAtZeroAndStartAgainAtOne scales each
// provider of the target cluster down and up, then shows on the core
// provider that a change it would reconcile waits while it is at zero.
func TestAProvidersControllersStopAtZeroAndStartAgainAtOne(t *testing.T) {
	ctx := context.Background()
	m := env.Target
	for _, p := range m.CAPI.Providers {
		t.Run(p.Name+" stops with its last pod and starts with a new one", func(t *testing.T) {
			g := NewWithT(t)
			t.Cleanup(func() { restore(t, m, p) })
			before := len(p.Runs())
			scaleAndWait(t, m, p, 0)
			runs := p.Runs()
			last := runs[len(runs)-1]
			g.Expect(last.Stopped).NotTo(BeZero())
			g.Expect(last.Killed).To(BeFalse(), "an idle manager stops within the grace period")
			g.Expect(last.Err).NotTo(HaveOccurred())
			// The pod stays until the manager is gone, then goes.
			g.Eventually(func(g Gomega) []corev1.Pod {
				pods := &corev1.PodList{}
				g.Expect(m.Client.List(ctx, pods, client.InNamespace(p.Namespace), client.MatchingLabels{capiprovider.ProviderLabel: p.Name})).To(Succeed())
				return pods.Items
			}, 20*time.Second).Should(BeEmpty())
			// A write the stopped process still tried (its event
			// broadcaster flushing, late under load) is refused on the
			// way and never reaches the API server: only the others
			// count.
			for _, w := range m.CAPI.Writes() {
				if w.Provider == p.Name && w.Time.After(last.Stopped) && !w.Refused {
					t.Errorf("%s wrote after its controllers stopped: %s", p.Name, w)
				}
			}
			scaleAndWait(t, m, p, 1)
			g.Expect(p.Runs()).To(HaveLen(before + 1))
		})
	}

	t.Run("a change the Cluster controller would reconcile waits while core is at zero", func(t *testing.T) {
		g := NewWithT(t)
		core := m.CAPI.Provider(capiprovider.CoreProvider)
		ns := testenv.NewNamespace(t, m, "lifecycle")
		t.Cleanup(func() { restore(t, m, core) })
		cluster := newCluster(ns, "c1")
		g.Expect(m.Client.Create(ctx, cluster)).To(Succeed())
		g.Eventually(func(g Gomega) []string {
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
			return cluster.Finalizers
		}, 20*time.Second).Should(ContainElement(clusterv1.ClusterFinalizer), "the running Cluster controller adds its finalizer")

		scaleAndWait(t, m, core, 0)
		// The LoopCluster the Cluster points at appears: the Cluster
		// controller would adopt it (owner reference) at once.
		lc := newLoop(loopprovider.ClusterKind, ns, "c1")
		g.Expect(m.Client.Create(ctx, lc)).To(Succeed())
		g.Consistently(func(g Gomega) []metav1.OwnerReference {
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc)).To(Succeed())
			return lc.GetOwnerReferences()
		}, 5*time.Second, 250*time.Millisecond).Should(BeEmpty(), "nothing adopts the LoopCluster while core is at zero")

		scaleAndWait(t, m, core, 1)
		g.Eventually(func(g Gomega) []metav1.OwnerReference {
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc)).To(Succeed())
			return lc.GetOwnerReferences()
		}, 30*time.Second).Should(ContainElement(HaveField("Name", "c1")), "the Cluster controller adopts the LoopCluster once back")
		g.Eventually(func(g Gomega) bool {
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
			return ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false)
		}, 30*time.Second).Should(BeTrue(), "the loop provider provisions the LoopCluster, and core reports it")
	})
}

// machineFor creates, in ns, a Cluster with its LoopCluster (paused or
// not), a Machine with bootstrap data and a LoopMachine owned by it.
func machineFor(t *testing.T, m *testenv.Management, ns, name string, paused bool) *unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cluster := newCluster(ns, name)
	cluster.Spec.Paused = ptr.To(paused)
	g.Expect(m.Client.Create(ctx, cluster)).To(Succeed())
	lc := newLoop(loopprovider.ClusterKind, ns, name)
	lc.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cluster.UID}})
	g.Expect(m.Client.Create(ctx, lc)).To(Succeed())
	if paused {
		// Nothing reconciles a paused Cluster: write what core would have
		// (core still writes its Paused condition meanwhile).
		g.Eventually(func() error {
			if err := m.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
				return err
			}
			cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
			return m.Client.Status().Update(ctx, cluster)
		}, 10*time.Second).Should(Succeed())
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: name,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: loopprovider.GroupVersion.Group, Kind: loopprovider.MachineKind, Name: name,
			},
			Version: "v1.34.2",
		},
	}
	g.Expect(m.Client.Create(ctx, machine)).To(Succeed())
	lm := newLoop(loopprovider.MachineKind, ns, name)
	lm.SetLabels(map[string]string{clusterv1.ClusterNameLabel: name})
	lm.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: machine.UID}})
	g.Expect(unstructured.SetNestedField(lm.Object, "small", "spec", "flavor")).To(Succeed())
	g.Expect(m.Client.Create(ctx, lm)).To(Succeed())
	return lm
}

func providerID(ctx context.Context, g Gomega, m *testenv.Management, lm *unstructured.Unstructured) string {
	g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(lm), lm)).To(Succeed())
	id, _, _ := unstructured.NestedString(lm.Object, "spec", "providerID")
	return id
}

func TestAnInFlightReconcileFinishesBeforeTheManagerStops(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := env.Source
	loop := m.CAPI.Provider(capiprovider.LoopInfrastructureProvider)
	ns := testenv.NewNamespace(t, m, "inflight")
	t.Cleanup(func() { restore(t, m, loop) })
	vm := ns + "/slow"
	hold := env.Cloud.Hold(func(c cloud.Call) bool { return c.Type == cloud.Created && c.VMName == vm })
	t.Cleanup(hold.Release)

	lm := machineFor(t, m, ns, "slow", false)
	select {
	case <-hold.Arrived():
	case <-time.After(60 * time.Second):
		t.Fatalf("the LoopMachine's VM create never reached the cloud")
	}
	activity := m.CAPI.LoopActivity()
	g.Expect(activity.InFlight()).To(BeNumerically(">=", 1))

	// SIGTERM: the pod starts terminating while the create is in flight.
	scale(ctx, g, m, loop, 0)
	g.Eventually(func() time.Time {
		runs := loop.Runs()
		return runs[len(runs)-1].StopRequested
	}, 20*time.Second).ShouldNot(BeZero())
	g.Consistently(func(g Gomega) {
		g.Expect(loop.ControllersRunning()).To(BeTrue(), "the manager waits for its in-flight reconcile")
		pods := &corev1.PodList{}
		g.Expect(m.Client.List(ctx, pods, client.InNamespace(loop.Namespace), client.MatchingLabels{capiprovider.ProviderLabel: loop.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "the terminating pod stays while its process runs")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	released := time.Now()
	hold.Release()
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	g.Expect(loop.WaitControllers(waitCtx, false)).To(Succeed())
	runs := loop.Runs()
	last := runs[len(runs)-1]
	t.Logf("stop requested %s, create released %s later, manager stopped %s after that",
		last.StopRequested.Format("15:04:05.000"), released.Sub(last.StopRequested).Round(time.Millisecond), last.Stopped.Sub(released).Round(time.Millisecond))
	g.Expect(last.Killed).To(BeFalse(), "released within the grace period, the reconcile finishes")
	g.Expect(last.Stopped).To(BeTemporally(">=", released))
	g.Expect(activity.InFlight()).To(BeZero(), "none is in flight once the manager has stopped")
	g.Expect(env.Cloud.FindVMs(vm)).To(HaveLen(1), "the cloud carried out the held create")
	// The reconcile went on to record the VM, but its own Deployment's
	// webhook had gone with the terminating pod: as in a real cluster, the
	// write is refused.
	var recorded []capiprovider.Write
	for _, w := range m.CAPI.Writes() {
		if w.Provider == loop.Name && w.Kind == loopprovider.MachineKind && w.Namespace == ns && w.Time.After(released) {
			recorded = append(recorded, w)
		}
	}
	g.Expect(recorded).NotTo(BeEmpty(), "the finishing reconcile tried to record the VM")
	g.Expect(recorded[0].Succeeded()).To(BeFalse(), "%s: the provider's own webhook is down", recorded[0])
	started := activity.Started()
	g.Consistently(activity.Started, 2*time.Second, 200*time.Millisecond).Should(Equal(started), "no reconcile runs at zero")

	restore(t, m, loop)
	g.Eventually(func(g Gomega) string { return providerID(ctx, g, m, lm) }, 30*time.Second).Should(Equal(loopprovider.ProviderIDPrefix+vm),
		"back at one, the provider finds the VM the cloud made")
	g.Expect(env.Cloud.FindVMs(vm)).To(HaveLen(1), "and adopts it rather than creating another")
}

func TestIgnorePauseMakesTheLoopProviderActOnPausedMachines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := env.Source
	switches := m.CAPI.LoopSwitches()
	ns := testenv.NewNamespace(t, m, "pause")
	t.Cleanup(func() { switches.SetIgnorePause(false) })

	lm := machineFor(t, m, ns, "paused", true)
	touch := func(value string) {
		patch := client.MergeFrom(lm.DeepCopy())
		labels := lm.GetLabels()
		labels["touched"] = value
		lm.SetLabels(labels)
		g.Expect(m.Client.Patch(ctx, lm, patch)).To(Succeed())
	}
	activity := m.CAPI.LoopActivity()
	g.Eventually(func() int64 { return activity.ReconcilesOf(loopprovider.MachineKind, ns, "paused") }, 20*time.Second).Should(BeNumerically(">", 0))
	touch("1")
	g.Consistently(func(g Gomega) {
		g.Expect(providerID(ctx, g, m, lm)).To(BeEmpty())
		g.Expect(lm.GetFinalizers()).To(BeEmpty())
		g.Expect(env.Cloud.FindVMs(ns + "/paused")).To(BeEmpty())
	}, 4*time.Second, 250*time.Millisecond).Should(Succeed(), "a provider that honours pause leaves a paused LoopMachine alone")

	switches.SetIgnorePause(true)
	touch("2")
	g.Eventually(func(g Gomega) string { return providerID(ctx, g, m, lm) }, 20*time.Second).Should(Equal(loopprovider.ProviderIDPrefix+ns+"/paused"),
		"with IgnorePause the paused LoopMachine is reconciled: its VM is created")
	vms := env.Cloud.FindVMs(ns + "/paused")
	g.Expect(vms).To(HaveLen(1))
	g.Expect(vms[0].CreatedBy).To(Equal(cloud.Caller{ManagementCluster: m.Name, Kind: loopprovider.MachineKind, Namespace: ns, Name: "paused"}))
}
