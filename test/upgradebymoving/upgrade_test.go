//go:build cluster

package upgradebymoving_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/capirelease"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// takeoverWindow is how long the moved cluster must stay Available, with
// nothing made again, once the target's controllers have taken it over.
const takeoverWindow = 45 * time.Second

// TestAV1_10FleetMovedIntoV1_14AndBackIsTakenOverWithNoMachineReplaced upgrades
// by moving: two workload clusters that Cluster API v1.10.9's own managers
// provisioned on the loop provider, a classic one and one of a
// ClusterClass (each a KubeadmControlPlane of one and a MachineDeployment
// of one, each Machine's Node in the workload API server), are moved,
// statuses carried, by the operator as users install it into a management
// cluster running Cluster API v1.14.2. The operator converts every Cluster
// API object from v1beta1 with Cluster API's code while both clusters'
// providers are at zero. Then v1.14.2's controllers take the clusters
// over: they are Available for 45 s, every Machine Running and up to date
// with its KubeadmControlPlane or MachineDeployment (no rollout), and
// nothing was made again: the same Machines, MachineSets, KubeadmConfigs,
// LoopMachines, machine templates and Secrets by name, no VM created,
// deleted or powered off, no Machine created or deleted by any controller,
// the same Nodes by UID. Then the operator installed in the newer cluster
// moves them back, converted back to v1beta1, and v1.10.9's controllers
// take them over again with the same guarantees.
func TestAV1_10FleetMovedIntoV1_14AndBackIsTakenOverWithNoMachineReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	ns := testenv.NewNamespace(t, env.Source, "upgrade")
	t.Cleanup(func() { deleteNamespace(t, env.Target, ns) })
	shapes := map[string]capirelease.Shape{"older": capirelease.Classic, "older-cc": capirelease.Topology}
	clusters := []fleet.WorkloadCluster{}
	for name, shape := range shapes {
		objs, err := capirelease.Fleet(env.Workload, ns, name, shape)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(capirelease.CreateFleet(ctx, env.Source.Client, objs)).To(Succeed())
		clusters = append(clusters, fleet.WorkloadCluster{Namespace: ns, Name: name})
	}

	// v1.10.9 provisions the cluster, and leaves it alone once it is up.
	kubeletsCtx, stopKubelets := context.WithCancel(ctx)
	kubeletsDone := make(chan struct{})
	go func() {
		defer close(kubeletsDone)
		capirelease.ActAsKubelets(kubeletsCtx, env.Source.Client, env.Workload, ns, t.Logf)
	}()
	defer func() { stopKubelets(); <-kubeletsDone }()
	logs := "logs: " + env.LogDirs()
	g.Eventually(func(g Gomega) {
		for name := range shapes {
			c := get(g, ctx, env.Source, "cluster.x-k8s.io/v1beta1", "Cluster", ns, name)
			g.Expect(olderCondition(c, "Available")).To(Equal("True"), "the Available condition of Cluster %s", name)
		}
		machines := list(g, ctx, env.Source, "cluster.x-k8s.io/v1beta1", "Machine", ns)
		g.Expect(machines).To(HaveLen(2 * len(shapes)))
		for _, m := range machines {
			g.Expect(m.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("phase", "Running")), m.GetName())
		}
	}).WithContext(ctx).WithTimeout(4*time.Minute).WithPolling(time.Second).Should(Succeed(), logs)
	settled := state(g, ctx, env.Source, "v1beta1", ns)
	g.Consistently(func(g Gomega) {
		g.Expect(state(g, ctx, env.Source, "v1beta1", ns)).To(Equal(settled), "nothing made again in the source")
	}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
	stopKubelets()
	<-kubeletsDone
	before := state(g, ctx, env.Source, "v1beta1", ns)
	nodes := nodeUIDs(g, ctx)
	g.Expect(nodes).To(HaveLen(2 * len(shapes)))
	t.Logf("Cluster API %s provisioned a classic cluster and one of a ClusterClass: %d Machines, %d MachineSets, %d KubeadmConfigs, %d LoopMachines, %d templates, %d Secrets",
		env.Source.Release.Version, len(before.Machines), len(before.MachineSets), len(before.KubeadmConfigs), len(before.LoopMachines), len(before.Templates), len(before.Secrets))

	// The move, by the operator as users install it.
	mark := takeover.MarkNow(env)
	op := startOperator(t)
	tl, mo, err := op.Move(ctx, nil, "upgrade", []string{ns}, func(spec *movev1alpha1.MoveOperationSpec) {
		spec.ObjectStatusPolicy = movev1alpha1.ObjectStatusCarry
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mo.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
	t.Logf("moved in %s: %s", tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)
	g.Expect(mo.Status.Plan).NotTo(BeNil())
	for _, kind := range []string{"Cluster.cluster.x-k8s.io", "Machine.cluster.x-k8s.io", "MachineDeployment.cluster.x-k8s.io",
		"KubeadmControlPlane.controlplane.cluster.x-k8s.io", "KubeadmConfig.bootstrap.cluster.x-k8s.io"} {
		g.Expect(mo.Status.Plan.Versions).To(ContainElement(movev1alpha1.KindVersion{
			Kind: kind, Source: "v1beta1", Target: "v1beta2", Conversion: movev1alpha1.ConversionToNewer,
		}), kind)
	}

	// No controller ran in either cluster while the operator copied:
	// v1.10.9's processes and the loop providers' managers.
	copying := tl.Reached(string(movev1alpha1.PhaseCopying))
	g.Expect(copying).NotTo(BeZero())
	expectStoppedBetween(t, copying, tl.Reached(string(movev1alpha1.PhaseRestoringTarget)))

	// v1.14.2 takes it over. The statuses were carried, Available among
	// them: what shows that the target's controllers have taken each object
	// over is a write of theirs to it since they started again.
	f := &fleet.Fleet{Namespaces: []string{ns}, Clusters: clusters}
	keep := takeover.InFleet(f)
	restarted := tl.Reached(string(movev1alpha1.PhaseRestoringTarget))
	g.Expect(restarted).NotTo(BeZero())
	g.Eventually(func() error {
		if err := reconciledSince(ctx, keep, mark, restarted, ns); err != nil {
			return err
		}
		if err := takeover.Available(ctx, env.Target, f); err != nil {
			return err
		}
		return takeover.Running(ctx, env.Target, f)
	}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(),
		"Cluster API %s's controllers take the cluster over (%s)", "v1.14.2", logs)
	tookOver := time.Now()
	g.Consistently(func(g Gomega) {
		g.Expect(takeover.Available(ctx, env.Target, f)).To(Succeed())
		expectNoRollout(g, ctx, env.Target, "v1beta2", "upToDateReplicas", ns)
	}).WithContext(ctx).WithTimeout(takeoverWindow).WithPolling(5*time.Second).Should(Succeed(), logs)
	t.Logf("Cluster API v1.14.2's controllers took the cluster over %s after Done, and it stayed Available for %s",
		tookOver.Sub(tl.Ended).Round(time.Millisecond), takeoverWindow)

	after := state(g, ctx, env.Target, "v1beta2", ns)
	g.Expect(after).To(Equal(before), "the same Machines (and providerIDs), MachineSets, KubeadmConfigs, LoopMachines, templates (no topology rollout) and Secrets")
	g.Expect(nodeUIDs(g, ctx)).To(Equal(nodes), "the same Nodes")
	churn := takeover.ChurnSince(env, mark, keep)
	g.Expect(churn.VMs).To(BeEmpty(), "no VM created, deleted or powered off")
	g.Expect(churn.Machines).To(BeEmpty(), "no Machine created or deleted by a controller")
	var made []capiprovider.Write
	for _, w := range takeover.Writes(env.Target, mark.TargetWrites(), keep) {
		if w.Kind == "Event" {
			continue // what the controllers report, not part of the cluster
		}
		if (takeover.Created(w) || w.Verb == "delete") && w.Succeeded() {
			made = append(made, w)
		}
	}
	g.Expect(made).To(BeEmpty(), "the target's controllers created or deleted nothing of the cluster")
	t.Logf("UPGRADE BY MOVING: Cluster API %s -> v1.14.2, no Machine, KubeadmConfig, infrastructure machine, bootstrap Secret, VM or Node made again",
		env.Source.Release.Version)

	// And back, by the operator installed in the newer cluster: Cluster
	// API's kinds converted back to v1beta1, v1.10.9's controllers take the
	// clusters over again with nothing made again.
	g.Expect(t.Run("and back into v1.10", func(t *testing.T) {
		g := NewWithT(t)
		markBack := takeover.MarkNow(env)
		back := startOperatorIn(t, env.Target, env.Source)
		tl, mo, err := back.Move(ctx, nil, "back", []string{ns}, func(spec *movev1alpha1.MoveOperationSpec) {
			spec.ObjectStatusPolicy = movev1alpha1.ObjectStatusCarry
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mo.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
		t.Logf("moved back in %s: %s", tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)
		g.Expect(mo.Status.Plan.Versions).To(ContainElement(movev1alpha1.KindVersion{
			Kind: "KubeadmControlPlane.controlplane.cluster.x-k8s.io", Source: "v1beta2", Target: "v1beta1", Conversion: movev1alpha1.ConversionToOlder,
		}))
		copying := tl.Reached(string(movev1alpha1.PhaseCopying))
		g.Expect(copying).NotTo(BeZero())
		expectStoppedBetween(t, copying, tl.Reached(string(movev1alpha1.PhaseRestoringTarget)))

		// v1.10.9's managers run again (as processes, whose writes are
		// not logged here): the clusters must then be Available and stay
		// as they are for the window.
		restarted := tl.Reached(string(movev1alpha1.PhaseRestoringTarget))
		for _, p := range env.Source.Release.Providers {
			runs := p.Runs()
			g.Expect(runs).NotTo(BeEmpty())
			last := runs[len(runs)-1]
			g.Expect(last.Started).To(BeTemporally(">", restarted), "%s runs again after the move", p.Name)
			g.Expect(last.Stopped.IsZero()).To(BeTrue(), "%s runs again after the move (log: %s)", p.Name, p.LogPath)
		}
		g.Eventually(func(g Gomega) {
			for _, wc := range clusters {
				c := get(g, ctx, env.Source, "cluster.x-k8s.io/v1beta1", "Cluster", ns, wc.Name)
				g.Expect(olderCondition(c, "Available")).To(Equal("True"), "the Available condition of Cluster %s", wc.Name)
				g.Expect(c.GetFinalizers()).To(ContainElement("cluster.cluster.x-k8s.io"))
			}
			for _, m := range list(g, ctx, env.Source, "cluster.x-k8s.io/v1beta1", "Machine", ns) {
				g.Expect(m.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("phase", "Running")), m.GetName())
			}
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), logs)
		g.Consistently(func(g Gomega) {
			for _, wc := range clusters {
				c := get(g, ctx, env.Source, "cluster.x-k8s.io/v1beta1", "Cluster", ns, wc.Name)
				g.Expect(olderCondition(c, "Available")).To(Equal("True"), wc.Name)
			}
			expectNoRollout(g, ctx, env.Source, "v1beta1", "updatedReplicas", ns)
			g.Expect(state(g, ctx, env.Source, "v1beta1", ns)).To(Equal(before), "nothing made again")
		}).WithContext(ctx).WithTimeout(takeoverWindow).WithPolling(5*time.Second).Should(Succeed(), logs)
		g.Expect(nodeUIDs(g, ctx)).To(Equal(nodes), "the same Nodes")
		churn := takeover.ChurnSince(env, markBack, keep)
		g.Expect(churn.VMs).To(BeEmpty(), "no VM created, deleted or powered off")
		g.Expect(churn.Machines).To(BeEmpty(), "no Machine created or deleted by a controller")
		t.Logf("AND BACK: v1.14.2 -> Cluster API %s, no Machine, KubeadmConfig, infrastructure machine, bootstrap Secret, VM or Node made again",
			env.Source.Release.Version)
	})).To(BeTrue())
}

// expectStoppedBetween fails the test if a provider's controllers ran in
// either cluster between from and to: a manager of the release in the
// source (a process), or a manager this process runs (the loop provider
// in the source, every provider in the target).
func expectStoppedBetween(t *testing.T, from, to time.Time) {
	t.Helper()
	ran := func(cluster, provider string, started, stopped time.Time) {
		if stopped.IsZero() {
			stopped = time.Now()
		}
		if started.Before(to) && stopped.After(from) {
			t.Errorf("%s: the controllers of %s ran from %s to %s, during the copy (%s to %s)", cluster, provider,
				started.Format("15:04:05.000"), stopped.Format("15:04:05.000"), from.Format("15:04:05.000"), to.Format("15:04:05.000"))
		}
	}
	for _, p := range env.Source.Release.Providers {
		for _, r := range p.Runs() {
			ran(env.Source.Name, p.Name, r.Started, r.Stopped)
		}
	}
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		for _, p := range m.CAPI.Providers {
			for _, r := range p.Runs() {
				ran(m.Name, p.Name, r.Started, r.Stopped)
			}
		}
	}
}

// expectNoRollout fails unless every KubeadmControlPlane and
// MachineDeployment of ns in m, read at version, has all its replicas up
// to date by its status field upToDate (v1beta2's upToDateReplicas,
// v1beta1's updatedReplicas): no rollout is under way.
func expectNoRollout(g Gomega, ctx context.Context, m *testenv.Management, version, upToDate, ns string) {
	for _, k := range []struct{ group, kind string }{
		{"controlplane.cluster.x-k8s.io", "KubeadmControlPlane"}, {"cluster.x-k8s.io", "MachineDeployment"},
	} {
		for _, o := range list(g, ctx, m, k.group+"/"+version, k.kind, ns) {
			replicas, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			current, _, _ := unstructured.NestedInt64(o.Object, "status", upToDate)
			g.Expect(current).To(Equal(replicas), "%s %s: every Machine up to date, no rollout", k.kind, o.GetName())
		}
	}
}

// takenOver are the kinds of the moved cluster, by API version in the
// target, that its controllers reconcile.
var takenOver = []struct{ apiVersion, kind string }{
	{"cluster.x-k8s.io/v1beta2", "Cluster"},
	{"cluster.x-k8s.io/v1beta2", "ClusterClass"},
	{"cluster.x-k8s.io/v1beta2", "MachineDeployment"},
	{"cluster.x-k8s.io/v1beta2", "MachineSet"},
	{"cluster.x-k8s.io/v1beta2", "Machine"},
	{"controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane"},
	{"bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig"},
	{loopprovider.GroupVersion.String(), loopprovider.ClusterKind},
	{loopprovider.GroupVersion.String(), loopprovider.MachineKind},
}

// reconciledSince returns the first object of ns in the target, of the
// kinds taken over, that the target's controllers have not written since
// since (the log of their writes from mark on), nil when all were.
func reconciledSince(ctx context.Context, keep func(namespace, name string) bool, mark takeover.Mark, since time.Time, ns string) error {
	written := map[string]bool{}
	for _, w := range takeover.Writes(env.Target, mark.TargetWrites(), keep) {
		if w.Succeeded() && w.Time.After(since) {
			written[w.Kind+" "+w.Name] = true
		}
	}
	for _, k := range takenOver {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(k.apiVersion)
		l.SetKind(k.kind + "List")
		if err := env.Target.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return fmt.Errorf("no %s in the target", k.kind)
		}
		for _, o := range l.Items {
			if !written[k.kind+" "+o.GetName()] {
				return fmt.Errorf("%s %s/%s not yet reconciled by the target's controllers", k.kind, ns, o.GetName())
			}
		}
	}
	return nil
}

// fleetState is what a rollout or a takeover that makes things again
// would change: the names of the objects that stand for the machines.
type fleetState struct {
	// Machines maps each Machine to its providerID.
	Machines                                           map[string]string
	MachineSets, KubeadmConfigs, LoopMachines, Secrets []string
	// Templates are the machine templates: the topology controller
	// rotates them (new names) when it rolls a cluster out.
	Templates []string
}

// state reads the cluster's machine objects of ns, Cluster API's kinds at
// version.
func state(g Gomega, ctx context.Context, m *testenv.Management, version, ns string) fleetState {
	s := fleetState{Machines: map[string]string{}}
	for _, o := range list(g, ctx, m, "cluster.x-k8s.io/"+version, "Machine", ns) {
		s.Machines[o.GetName()], _, _ = unstructured.NestedString(o.Object, "spec", "providerID")
	}
	names := func(apiVersion, kind string) []string {
		var out []string
		for _, o := range list(g, ctx, m, apiVersion, kind, ns) {
			out = append(out, o.GetName())
		}
		slices.Sort(out)
		return out
	}
	s.MachineSets = names("cluster.x-k8s.io/"+version, "MachineSet")
	s.KubeadmConfigs = names("bootstrap.cluster.x-k8s.io/"+version, "KubeadmConfig")
	s.LoopMachines = names(loopprovider.GroupVersion.String(), loopprovider.MachineKind)
	s.Secrets = names("v1", "Secret")
	s.Templates = append(names(loopprovider.GroupVersion.String(), loopprovider.MachineTemplateKind),
		names("bootstrap.cluster.x-k8s.io/"+version, "KubeadmConfigTemplate")...)
	return s
}

func list(g Gomega, ctx context.Context, m *testenv.Management, apiVersion, kind, ns string) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	g.Expect(m.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
	return l.Items
}

func get(g Gomega, ctx context.Context, m *testenv.Management, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)).To(Succeed())
	return o
}

// olderCondition is the status of a condition a v1.10 object reports in
// the v1beta2 format (status.v1beta2.conditions), empty if absent.
func olderCondition(o *unstructured.Unstructured, conditionType string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "v1beta2", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == conditionType {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// nodeUIDs are the workload API server's Nodes by name.
func nodeUIDs(g Gomega, ctx context.Context) map[string]types.UID {
	nodes := &corev1.NodeList{}
	g.Expect(env.Workload.Client.List(ctx, nodes)).To(Succeed())
	out := map[string]types.UID{}
	for _, n := range nodes.Items {
		out[n.Name] = n.UID
	}
	return out
}

// startOperator starts the operator as users install it in the source,
// moving to the target, and stops it when the test ends.
func startOperator(t *testing.T) *mover.Operator {
	t.Helper()
	return startOperatorIn(t, env.Source, env.Target)
}

// startOperatorIn starts the operator as users install it in source,
// moving to target, and stops it when the test ends.
func startOperatorIn(t *testing.T, source, target *testenv.Management) *mover.Operator {
	t.Helper()
	return mover.StartInTest(t, source, target, "go test ./test/upgradebymoving/")
}

// deleteNamespace deletes ns in m, without waiting for its objects.
func deleteNamespace(t *testing.T, m *testenv.Management, ns string) {
	err := m.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s in %s: %v", ns, m.Name, err)
	}
}
