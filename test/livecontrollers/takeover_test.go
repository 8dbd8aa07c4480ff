//go:build cluster

package livecontrollers_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// Bounds of the takeover test.
const (
	// takeoverSettleBound is how long a fresh fleet may take to be
	// Available in the source before the move (see settleBound).
	takeoverSettleBound = 5 * time.Minute
	// moveBound is how long the move itself may take on a loaded machine;
	// it takes seconds on a quiet one, plus the target's controllers
	// starting.
	moveBound = 6 * time.Minute
	// reconcileBound is how long the target's controllers may take, after
	// Done, to reconcile every moved object: with spec.objectStatusPolicy Rebuild the
	// copies carry no status, so everything they report is theirs, after
	// connecting to each workload cluster.
	reconcileBound = 5 * time.Minute
	// takeoverWindow is how long the moved fleet is watched once the
	// target's controllers have reconciled it.
	takeoverWindow = 45 * time.Second
	// quietBeforeMove is how long the source's controllers must have left
	// a fresh fleet alone for it to count as settled: nothing in flight.
	quietBeforeMove = 10 * time.Second
)

// statusKinds are the moved kinds whose status the target's controllers
// compute, with the generation it was computed for.
var statusKinds = []schema.GroupVersionKind{
	clusterv1.GroupVersion.WithKind("Cluster"),
	clusterv1.GroupVersion.WithKind("Machine"),
	clusterv1.GroupVersion.WithKind("MachineSet"),
	clusterv1.GroupVersion.WithKind("MachineDeployment"),
	clusterv1.GroupVersion.WithKind("MachinePool"),
	controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"),
}

// provisionedKinds are the moved kinds whose status.initialization a
// provider sets once it has found (or made) what the object stands for.
var provisionedKinds = map[schema.GroupVersionKind]string{
	loopprovider.GroupVersion.WithKind(loopprovider.ClusterKind):     "provisioned",
	loopprovider.GroupVersion.WithKind(loopprovider.MachineKind):     "provisioned",
	loopprovider.GroupVersion.WithKind(loopprovider.MachinePoolKind): "provisioned",
	bootstrapv1.GroupVersion.WithKind("KubeadmConfig"):               "dataSecretCreated",
}

// runningKinds are the moved kinds with a phase, and the phase the
// source's settled fleet had them in.
var runningKinds = map[schema.GroupVersionKind]string{
	clusterv1.GroupVersion.WithKind("Machine"):     "Running",
	clusterv1.GroupVersion.WithKind("MachinePool"): "Running",
}

// TestTheTargetsControllersTakeOverAMovedFleetWithoutChurn moves a fleet of
// every shape with every controller running in both clusters, and shows
// what stopping the controllers buys: nothing writes while the objects are
// copied and deleted, the target's controllers take the fleet over as it
// is (no Machine, VM or bootstrap data made again, no rollout), and the
// source's controllers, back up, leave it alone. It does so for both
// spec.objectStatusPolicy values: with Rebuild the copies arrive without status, as
// with clusterctl; with Carry they arrive with the source's, and the
// bootstrap data of a MachinePool is not generated again either.
func TestTheTargetsControllersTakeOverAMovedFleetWithoutChurn(t *testing.T) {
	op := startOperator(t)
	for _, policy := range []movev1alpha1.ObjectStatusPolicy{movev1alpha1.ObjectStatusRebuild, movev1alpha1.ObjectStatusCarry} {
		t.Run("status "+string(policy), func(t *testing.T) { takeOverAMovedFleet(t, op, policy) })
	}
}

func takeOverAMovedFleet(t *testing.T, op *mover.Operator, policy movev1alpha1.ObjectStatusPolicy) {
	g := NewWithT(t)
	ctx := context.Background()
	prefix := "t" + strings.ToLower(string(policy[0])) + rand.String(4)
	f, err := fleet.Create(ctx, env.Source.Client, fleet.Options{
		Clusters:   3,
		Namespaces: []string{prefix + "-a", prefix + "-b"},
		Name:       prefix,
		Live:       &fleet.Live{Cloud: env.Cloud, Workload: env.Workload, ManagementCluster: env.Source.Name},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { deleteNamespaces(t, f.Namespaces) })
	shapes := map[fleet.Shape]bool{}
	for _, wc := range f.Clusters {
		shapes[wc.Shape] = true
	}
	g.Expect(shapes).To(HaveLen(3), "classic, ClusterClass and cross-namespace ClusterClass")
	ours := takeover.InFleet(f)
	g.Eventually(func() error {
		if err := clustersAvailable(ctx, env.Source, f); err != nil {
			return err
		}
		return takeover.Quiet(env.Source, ours, quietBeforeMove)
	}, takeoverSettleBound, 2*time.Second).Should(Succeed(), "the fresh fleet settles in the source before the move")
	before := takeFleetState(ctx, g, env.Source, f)
	cloudBefore := env.Cloud.LastSeq()
	sourceWrites, targetWrites := len(env.Source.CAPI.Writes()), len(env.Target.CAPI.Writes())

	moveCtx, cancel := context.WithTimeout(ctx, moveBound)
	defer cancel()
	tl, mo, err := op.Move(moveCtx, nil, "takeover-"+prefix, f.Namespaces, func(spec *movev1alpha1.MoveOperationSpec) { spec.ObjectStatusPolicy = policy })
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = op.Delete(context.Background(), mo) })
	g.Expect(mo.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
	t.Logf("moved in %s: %s", tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)

	// Nothing writes while the objects are copied and deleted.
	quietFrom, quietTo := tl.Reached(string(movev1alpha1.PhaseCopying)), tl.Reached(string(movev1alpha1.PhaseRestoringTarget))
	g.Expect(quietFrom).NotTo(BeZero())
	g.Expect(quietTo).To(BeTemporally(">", quietFrom))
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		expectStoppedBetween(t, m, quietFrom, quietTo)
	}

	// The target's controllers reconcile every moved object.
	g.Eventually(func() error { return reconciledByTarget(ctx, f) }, reconcileBound, 2*time.Second).
		Should(Succeed(), "the target's controllers reconcile the whole fleet")
	reconciled := time.Now()
	t.Logf("the target's controllers reconciled the fleet %s after Done", reconciled.Sub(tl.Ended).Round(time.Millisecond))
	atReconcile := takeFleetState(ctx, g, env.Target, f)

	// And leave it as it is.
	g.Consistently(func() error { return clustersAvailable(ctx, env.Target, f) }, takeoverWindow, 5*time.Second).
		Should(Succeed(), "the moved fleet stays Available in the target")
	after := takeFleetState(ctx, g, env.Target, f)
	g.Expect(after.names()).To(Equal(before.names()), "the target holds the Machines, infra machines, KubeadmConfigs and bootstrap Secrets the source held")
	g.Expect(after.uids).To(Equal(atReconcile.uids), "none was deleted and made again in the target")
	g.Expect(after.templates).To(Equal(before.templates), "no topology rollout: the template references are the source's")

	for _, w := range env.Target.CAPI.Writes()[targetWrites:] {
		if !ours(w.Namespace, w.Name) {
			continue
		}
		if churns(w) && w.Succeeded() {
			t.Errorf("target: a controller created or deleted a machine's object: %s", w)
		}
		if w.Kind == "Secret" && w.Verb == "update" {
			// Not churn by the letter (the Secret stays), but the bootstrap
			// data of a MachinePool is generated again: Cluster API v1.14's
			// KubeadmConfig controller recognises a config whose status a
			// move did not carry only when its owner is a Machine (it reads
			// spec.bootstrap.dataSecretName, which a MachinePool keeps under
			// spec.template). Carrying the status is the remedy.
			if policy == movev1alpha1.ObjectStatusCarry {
				t.Errorf("target: the bootstrap controller rewrote a bootstrap Secret although the move carried the KubeadmConfigs' status: %s", w)
			} else {
				t.Logf("FINDING: the target's bootstrap controller rewrote a bootstrap Secret (status %s; Carry avoids it): %s", policy, w)
			}
		}
	}
	var touched []capiprovider.Write
	for _, w := range env.Source.CAPI.Writes()[sourceWrites:] {
		if ours(w.Namespace, w.Name) && w.Time.After(quietFrom) {
			touched = append(touched, w)
		}
	}
	g.Expect(touched).To(BeEmpty(), "the source's controllers, back up, touch nothing that moved")
	var disturbed []cloud.Event
	for _, e := range env.Cloud.EventsSince(cloudBefore) {
		if e.Type != cloud.PowerOn && (ours(e.Caller.Namespace, "") || ours(vmNamespace(e.VMName), "")) {
			disturbed = append(disturbed, e)
		}
	}
	g.Expect(disturbed).To(BeEmpty(), "no VM created, deleted or powered off since the move began")
	t.Logf("writes to the fleet by the target's controllers since the move: %s",
		summarize(env.Target.CAPI.Writes()[targetWrites:], func(ns string) bool { return ours(ns, "") }))
	t.Logf("TAKEOVER: no VM or Machine created or deleted; the target's controllers reconciled the fleet of %d clusters (%d Machines)",
		len(f.Clusters), len(before.uids[machineKey]))
}

// startOperator runs the operator as installed (its binary out of the
// image, the Deployment's args, the shipped RBAC) until the test ends.
func startOperator(t *testing.T) *mover.Operator {
	t.Helper()
	return startOperatorIn(t, env.Source, env.Target)
}

// startOperatorIn starts the operator as users install it in source,
// moving to target, and stops it when the test ends.
func startOperatorIn(t *testing.T, source, target *testenv.Management) *mover.Operator {
	t.Helper()
	return mover.StartInTest(t, source, target, "go test ./test/livecontrollers/")
}

func vmNamespace(vmName string) string {
	ns, _, _ := strings.Cut(vmName, "/")
	return ns
}

// churns tells whether a write makes or removes a machine, its
// infrastructure or its bootstrap data.
func churns(w capiprovider.Write) bool {
	if !takeover.Created(w) && w.Verb != "delete" && w.Verb != "deletecollection" {
		return false
	}
	switch w.Kind {
	case "Machine", loopprovider.MachineKind, capiprovider.DevMachineKind, "KubeadmConfig", "Secret":
		return true
	}
	return false
}

// expectStoppedBetween checks that no controller of m ran, and none wrote,
// between from and to.
func expectStoppedBetween(t *testing.T, m *testenv.Management, from, to time.Time) {
	t.Helper()
	for _, p := range m.CAPI.Providers {
		for _, r := range p.Runs() {
			stopped := r.Stopped
			if stopped.IsZero() {
				stopped = time.Now()
			}
			if r.Started.Before(to) && stopped.After(from) {
				t.Errorf("%s: the controllers of %s ran from %s to %s, during the copy (%s to %s)", m.Name, p.Name,
					r.Started.Format("15:04:05.000"), stopped.Format("15:04:05.000"), from.Format("15:04:05.000"), to.Format("15:04:05.000"))
			}
		}
	}
	for _, w := range m.CAPI.Writes() {
		if w.Time.After(from) && w.Time.Before(to) {
			t.Errorf("%s: a controller wrote during the copy: %s", m.Name, w)
		}
	}
}

// clustersAvailable returns why a Cluster of the fleet is not Available.
func clustersAvailable(ctx context.Context, m *testenv.Management, f *fleet.Fleet) error {
	for _, wc := range f.Clusters {
		c := &clusterv1.Cluster{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, c); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if !conditions.IsTrue(c, clusterv1.ClusterAvailableCondition) {
			return fmt.Errorf("%s: cluster %s is not Available: %s", m.Name, wc.Name, describe(c))
		}
	}
	return nil
}

// reconciledByTarget returns the first moved object the target's
// controllers have not reconciled yet (see reconciledBy).
func reconciledByTarget(ctx context.Context, f *fleet.Fleet) error {
	return reconciledBy(ctx, env.Target, f)
}

// reconciledBy returns the first moved object the controllers of m, the
// cluster moved to, have not reconciled yet. The copies were created
// without status, so a status is their work: computed for the current
// generation, not paused, and for the loop and bootstrap kinds
// provisioned.
func reconciledBy(ctx context.Context, m *testenv.Management, f *fleet.Fleet) error {
	return reconciledByKinds(ctx, m, f, loopKinds)
}

// fleetKinds are the kinds a fleet's provider reconciles, for the checks.
type fleetKinds struct {
	// status are the kinds whose status the controllers compute.
	status []schema.GroupVersionKind
	// provisioned are the kinds whose status.initialization.<field> a
	// provider sets.
	provisioned map[schema.GroupVersionKind]string
	// infraMachine is the infrastructure machine kind.
	infraMachine schema.GroupVersionKind
}

// loopKinds are those of fleet.Create's fleets.
var loopKinds = fleetKinds{status: statusKinds, provisioned: provisionedKinds,
	infraMachine: loopprovider.GroupVersion.WithKind(loopprovider.MachineKind)}

// reconciledByKinds is reconciledBy for a fleet of the given kinds.
func reconciledByKinds(ctx context.Context, m *testenv.Management, f *fleet.Fleet, kinds fleetKinds) error {
	c := m.Client
	for _, gvk := range kinds.status {
		items, err := listIn(ctx, c, gvk, f.Namespaces)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("no %s in %s", gvk.Kind, m.Name)
		}
		for _, u := range items {
			if err := reconciledAtGeneration(&u); err != nil {
				return err
			}
		}
	}
	for gvk, field := range kinds.provisioned {
		items, err := listIn(ctx, c, gvk, f.Namespaces)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("no %s in %s", gvk.Kind, m.Name)
		}
		for _, u := range items {
			if done, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", field); !done {
				return fmt.Errorf("%s %s/%s: status.initialization.%s is not true", gvk.Kind, u.GetNamespace(), u.GetName(), field)
			}
		}
	}
	for gvk, want := range runningKinds {
		items, err := listIn(ctx, c, gvk, f.Namespaces)
		if err != nil {
			return err
		}
		for _, u := range items {
			if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != want {
				return fmt.Errorf("%s %s/%s is in phase %q", gvk.Kind, u.GetNamespace(), u.GetName(), phase)
			}
		}
	}
	for _, wc := range f.Clusters {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, cl); err != nil {
			return err
		}
		if !conditions.IsTrue(cl, clusterv1.ClusterAvailableCondition) {
			return fmt.Errorf("cluster %s is not Available: %s", wc.Name, describe(cl))
		}
		if cl.Spec.Topology.IsDefined() && !conditions.IsTrue(cl, clusterv1.ClusterTopologyReconciledCondition) {
			return fmt.Errorf("the topology of cluster %s is not reconciled: %s", wc.Name, describe(cl))
		}
	}
	return nil
}

// reconciledAtGeneration returns why u's status was not computed for its
// current generation by a controller that saw it unpaused.
func reconciledAtGeneration(u *unstructured.Unstructured) error {
	key := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	observed, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if !found || observed != u.GetGeneration() {
		return fmt.Errorf("%s: status.observedGeneration %d, generation %d", key, observed, u.GetGeneration())
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == clusterv1.PausedCondition {
			if m["status"] != string(metav1.ConditionFalse) {
				return fmt.Errorf("%s: condition Paused is %v", key, m["status"])
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no Paused condition", key)
}

func listIn(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespaces []string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, ns := range namespaces {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", gvk.Kind, ns, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// Keys of fleetState.uids.
const (
	machineKey       = "Machine"
	infraMachineKey  = "infrastructure machine"
	kubeadmConfigKey = "KubeadmConfig"
	bootstrapKey     = "bootstrap Secret"
)

// fleetState is what a takeover must not change: which machines, infra
// machines, KubeadmConfigs and bootstrap Secrets exist (by kind, then
// namespace/name to UID), and which templates the MachineDeployments and
// KubeadmControlPlanes point at.
type fleetState struct {
	uids      map[string]map[string]types.UID
	templates map[string]string
}

// names drops the UIDs, which differ between clusters.
func (s fleetState) names() map[string][]string {
	out := map[string][]string{}
	for kind, objs := range s.uids {
		for key := range objs {
			out[kind] = append(out[kind], key)
		}
		sort.Strings(out[kind])
	}
	return out
}

func takeFleetState(ctx context.Context, g Gomega, m *testenv.Management, f *fleet.Fleet) fleetState {
	return takeFleetStateOf(ctx, g, m, f, loopKinds)
}

// takeFleetStateOf is takeFleetState for a fleet of the given kinds.
func takeFleetStateOf(ctx context.Context, g Gomega, m *testenv.Management, f *fleet.Fleet, kinds fleetKinds) fleetState {
	s := fleetState{uids: map[string]map[string]types.UID{}, templates: map[string]string{}}
	record := func(kind string, obj metav1.Object) {
		if s.uids[kind] == nil {
			s.uids[kind] = map[string]types.UID{}
		}
		s.uids[kind][obj.GetNamespace()+"/"+obj.GetName()] = obj.GetUID()
	}
	for _, ns := range f.Namespaces {
		machines := &clusterv1.MachineList{}
		g.Expect(m.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		for i := range machines.Items {
			record(machineKey, &machines.Items[i])
		}
		configs := &bootstrapv1.KubeadmConfigList{}
		g.Expect(m.Client.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
		bootstrapSecrets := map[string]bool{}
		for i := range configs.Items {
			record(kubeadmConfigKey, &configs.Items[i])
			if name := configs.Items[i].Status.DataSecretName; name != "" {
				bootstrapSecrets[name] = true
			}
		}
		secrets := &corev1.SecretList{}
		g.Expect(m.Client.List(ctx, secrets, client.InNamespace(ns))).To(Succeed())
		for i := range secrets.Items {
			if bootstrapSecrets[secrets.Items[i].Name] || secrets.Items[i].Type == clusterv1.ClusterSecretType && ownedByKind(&secrets.Items[i], "KubeadmConfig") {
				record(bootstrapKey, &secrets.Items[i])
			}
		}
		deployments := &clusterv1.MachineDeploymentList{}
		g.Expect(m.Client.List(ctx, deployments, client.InNamespace(ns))).To(Succeed())
		for _, md := range deployments.Items {
			s.templates["MachineDeployment "+ns+"/"+md.Name] = md.Spec.Template.Spec.InfrastructureRef.Name + " " + md.Spec.Template.Spec.Bootstrap.ConfigRef.Name
		}
		kcps := &controlplanev1.KubeadmControlPlaneList{}
		g.Expect(m.Client.List(ctx, kcps, client.InNamespace(ns))).To(Succeed())
		for _, kcp := range kcps.Items {
			s.templates["KubeadmControlPlane "+ns+"/"+kcp.Name] = kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name
		}
	}
	infra, err := listIn(ctx, m.Client, kinds.infraMachine, f.Namespaces)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range infra {
		record(infraMachineKey, &infra[i])
	}
	for _, kind := range []string{machineKey, infraMachineKey, kubeadmConfigKey, bootstrapKey} {
		g.Expect(s.uids[kind]).NotTo(BeEmpty(), "%s: the fleet has no %s", m.Name, kind)
	}
	return s
}

func ownedByKind(obj metav1.Object, kind string) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

// deleteNamespaces deletes the fleet's namespaces in both clusters without
// waiting: the controllers clean up behind.
func deleteNamespaces(t *testing.T, namespaces []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		for _, ns := range namespaces {
			err := m.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting namespace %s in %s: %v", ns, m.Name, err)
			}
		}
	}
}
