//go:build cluster

package recovery_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capioperator"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// The real cluster-api-operator (the released binary of the version go.mod
// pins), run against the shared clusters while its Deployment has a Ready
// pod, installing providers offline from ConfigMaps.

// realOperator is the real cluster-api-operator in one cluster and the
// providers it installed there.
type realOperator struct {
	m         *testenv.Management
	operator  *capioperator.Real
	providers []capioperator.Offline
}

// startRealOperator runs the real cluster-api-operator in a cluster until
// the test ends, with clusterctl's inventory hidden (it keeps its own
// there), and has it install a CoreProvider (cluster-api, one replica) and
// an InfrastructureProvider (sample, two replicas) from ConfigMaps; it
// returns once it reports both installed and Ready.
func startRealOperator(t *testing.T, m *testenv.Management) *realOperator {
	t.Helper()
	movetest.EnsureSetup(t)
	// The first time on a machine, its binary is built: minutes.
	build, cancelBuild := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancelBuild()
	if _, err := capioperator.Binary(build); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := capioperator.InstallCRDs(ctx, m.Config); err != nil {
		t.Fatalf("%s: %v", m.Name, err)
	}
	hideInventory(t, m)
	ro := &realOperator{m: m, providers: []capioperator.Offline{
		{Provider: capioperator.Provider{Kind: "CoreProvider", Namespace: testenv.NewNamespace(t, m, "capi-core"), Name: "cluster-api", Version: "v0.1.0"},
			Deployment: "capi-controller-manager", Replicas: 1},
		{Provider: capioperator.Provider{Kind: "InfrastructureProvider", Namespace: testenv.NewNamespace(t, m, "sample-system"), Name: "sample", Version: "v0.1.0"},
			Deployment: "capsample-controller-manager", Replicas: 2},
	}}
	key := types.NamespacedName{Namespace: testenv.NewNamespace(t, m, "capi-operator-system"), Name: "capi-operator-controller-manager"}
	t.Cleanup(func() {
		// It is stopped by now (cleanups run last first): its finalizers
		// would hold the provider objects, and the next one would delete
		// them (see capioperator.RemoveOffline).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := capioperator.RemoveOffline(ctx, m.Client, ro.providers); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	})
	op, err := capioperator.StartReal(ctx, m.Cluster, m.Client, key, capioperator.RealOptions{})
	if err != nil {
		t.Fatalf("%s: %v", m.Name, err)
	}
	ro.operator = op
	t.Cleanup(func() {
		if err := op.Stop(context.Background()); err != nil {
			t.Errorf("%s: stopping cluster-api-operator: %v", m.Name, err)
		}
		if err := op.Err(); err != nil {
			t.Logf("%s: cluster-api-operator's kubelet loop last failed with: %v", m.Name, err)
		}
	})
	for _, p := range ro.providers {
		if err := p.Install(ctx, m.Client); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	ro.waitInstalled(t, ctx)
	ro.waitSettled(t, ctx)
	return ro
}

// waitSettled waits until cluster-api-operator has stopped writing the
// provider objects. Right after an install, and after a provider's
// Deployment comes back, its health check flips a provider's Ready
// condition, which has it reconcile the provider again, and every
// reconcile applies the provider's manifests (its replicas included):
// a scale to zero made then is undone at once.
func (ro *realOperator) waitSettled(t *testing.T, ctx context.Context) {
	t.Helper()
	versions := func() string {
		var out []string
		for _, p := range ro.providers {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(capioperator.GVK(p.Kind))
			if err := ro.m.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, u); err != nil {
				return err.Error()
			}
			out = append(out, u.GetResourceVersion())
		}
		return strings.Join(out, ",")
	}
	last, since := versions(), time.Now()
	NewWithT(t).Eventually(func() time.Duration {
		if v := versions(); v != last {
			last, since = v, time.Now()
		}
		return time.Since(since)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).
		Should(BeNumerically(">", 2*time.Second), "%s: cluster-api-operator must stop writing its provider objects", ro.m.Name)
}

// waitInstalled waits until cluster-api-operator reports every provider
// installed and Ready, and their Deployments are Available at the replicas
// of their components.
func (ro *realOperator) waitInstalled(t *testing.T, ctx context.Context) {
	t.Helper()
	g := NewWithT(t)
	for _, p := range ro.providers {
		g.Eventually(func(g Gomega) {
			s, err := capioperator.StatusOf(ctx, ro.m.Client, p.Provider)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Installed(p.Version)).To(BeTrue(), "%s: %+v", p, s)
			d := &appsv1.Deployment{}
			g.Expect(ro.m.Client.Get(ctx, ro.deployment(p), d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To(p.Replicas)))
			g.Expect(d.Status.AvailableReplicas).To(Equal(p.Replicas))
		}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).
			Should(Succeed(), "%s: cluster-api-operator must install %s (its log: %s)", ro.m.Name, p, ro.operator.LogPath)
	}
}

func (ro *realOperator) deployment(p capioperator.Offline) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment}
}

// replicasOf reads a Deployment's spec.replicas.
func replicasOf(ctx context.Context, g Gomega, m *testenv.Management, key types.NamespacedName) int32 {
	d := &appsv1.Deployment{}
	g.Expect(m.Client.Get(ctx, key, d)).To(Succeed())
	return ptr.Deref(d.Spec.Replicas, 1)
}

// What the real cluster-api-operator does to a provider it installed and
// that someone scaled to zero: nothing while it runs, until its next
// resync (--sync-period, 10 minutes by default) re-applies the provider's
// manifests, replicas included; and the same at once when it starts.
func TestTheRealClusterAPIOperatorScalesAProviderUpOnlyWhenItStartsOrResyncs(t *testing.T) {
	ro := startRealOperator(t, movetest.Env.Source)
	ctx := context.Background()
	g := NewWithT(t)
	infra := ro.providers[1]
	key := ro.deployment(infra)
	restart := func() time.Time {
		scaleDeployment(ctx, g, ro.m, ro.operator.Key, 0)
		g.Expect(ro.operator.WaitRunning(ctx, false)).To(Succeed())
		scaleDeployment(ctx, g, ro.m, ro.operator.Key, 1)
		g.Expect(ro.operator.WaitRunning(ctx, true)).To(Succeed())
		return time.Now()
	}

	// Its first resync is 10 minutes away.
	scaleDeployment(ctx, g, ro.m, key, 0)
	g.Consistently(func() int32 { return replicasOf(ctx, g, ro.m, key) }, 3*time.Second, 200*time.Millisecond).
		Should(BeZero(), "while it runs, a provider scaled to zero stays there")

	startedAt := restart()
	g.Eventually(func() int32 { return replicasOf(ctx, g, ro.m, key) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infra.Replicas), "when it starts, it scales the provider back to the replicas of its manifests")
	t.Logf("back at %d replicas %s after its process started", infra.Replicas, time.Since(startedAt).Round(100*time.Millisecond))
	ro.waitInstalled(t, ctx)
	ro.waitSettled(t, ctx)

	const syncPeriod = 5 * time.Second
	ro.operator.SetSyncPeriod(syncPeriod)
	restart()
	ro.waitSettled(t, ctx)
	scaleDeployment(ctx, g, ro.m, key, 0)
	zeroAt := time.Now()
	g.Eventually(func() int32 { return replicasOf(ctx, g, ro.m, key) }, 3*syncPeriod, 100*time.Millisecond).
		Should(Equal(infra.Replicas), "its resync scales the provider back to the replicas of its manifests")
	t.Logf("with --sync-period=%s, back at %d replicas %s after the scale to zero", syncPeriod, infra.Replicas, time.Since(zeroAt).Round(100*time.Millisecond))
	ro.waitInstalled(t, ctx)

	// Not to what it had before, but to its manifests' count.
	ro.operator.SetSyncPeriod(0)
	restart()
	ro.waitSettled(t, ctx)
	scaleDeployment(ctx, g, ro.m, key, infra.Replicas+1)
	restart()
	g.Eventually(func() int32 { return replicasOf(ctx, g, ro.m, key) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infra.Replicas), "when it starts, a provider scaled to another count goes back to its manifests' count")
	ro.waitInstalled(t, ctx)
}

// A move between two setups installed by the real cluster-api-operator
// (each installs a CoreProvider and an InfrastructureProvider from
// ConfigMaps): the move finds cluster-api-operator by its installers'
// label, stops it (its process exits) before the providers it installed
// and every other provider, and starts it again after them, target first;
// nothing runs while objects are copied and deleted; afterwards the
// providers run at their recorded replicas and cluster-api-operator, back,
// reports them installed and Ready.
func TestAMoveStopsTheRealClusterAPIOperatorAndRestartsItAfterItsProviders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := NewWithT(t)
	operators := map[string]*realOperator{
		"source": startRealOperator(t, movetest.Env.Source),
		"target": startRealOperator(t, movetest.Env.Target),
	}
	name := "realcapiop" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})
	stateBefore := movetest.StateOf(ctx, g)
	sourceBefore := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces), f.Namespaces...)
	runsBefore := map[string]int{}
	managers := map[string]*capioperator.Real{}
	for n, ro := range operators {
		runsBefore[n] = len(ro.operator.Runs())
		managers[n+" cluster-api-operator"] = ro.operator
	}

	writes := &replicaWrites{}
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: writes.observe})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "real-capi-operator", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: f.Namespaces})
	done, monitor := doneWhileDown(t, ctx, mo, managers, 4*time.Minute)

	t.Run("cluster-api-operator and every provider were stopped while objects were copied and deleted", func(t *testing.T) {
		monitor.assertNothingRan(t)
		for n, ro := range operators {
			runs := ro.operator.Runs()[runsBefore[n]-1:]
			if len(runs) != 2 || runs[0].Stopped.IsZero() || !runs[1].Stopped.IsZero() {
				t.Errorf("%s: cluster-api-operator must have been stopped once and started again; its runs: %+v", n, runs)
			}
		}
	})

	t.Run("it stops before the providers and starts after them, the target's providers first", func(t *testing.T) {
		g := NewWithT(t)
		isManager, managerIDs := managersOf(done)
		g.Expect(managerIDs).To(ConsistOf("source "+operators["source"].operator.Key.String(), "target "+operators["target"].operator.Key.String()))
		for n, ro := range operators {
			for _, p := range ro.providers {
				g.Expect(isManager).To(HaveKeyWithValue(n+" "+ro.deployment(p).String(), false), "%s: the provider %s is stopped as a provider", n, p)
			}
		}
		assertManagersAroundProviders(t, writes, isManager, 1, "source", "target")
		firstUp := map[string]int{}
		for i, ch := range writes.changes() {
			if _, seen := firstUp[ch.cluster]; ch.up && !seen && !isManager[ch.cluster+" "+ch.key.String()] {
				firstUp[ch.cluster] = i
			}
		}
		g.Expect(firstUp["target"]).To(BeNumerically("<", firstUp["source"]), "the target's providers start before the source's")
	})

	t.Run("the providers run at their recorded replicas, and cluster-api-operator reports them installed", func(t *testing.T) {
		g := NewWithT(t)
		for n, ro := range operators {
			g.Expect(ro.operator.WaitRunning(ctx, true)).To(Succeed(), "%s: cluster-api-operator runs again", n)
			ro.waitInstalled(t, ctx)
			d := &appsv1.Deployment{}
			g.Expect(ro.m.Client.Get(ctx, ro.operator.Key, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)), "%s: cluster-api-operator is restored", n)
			g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation), "%s: its record is dropped", n)
		}
		// Once it has started again and applied its manifests.
		for _, ro := range operators {
			ro.waitSettled(t, ctx)
		}
		g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "every provider at its recorded replicas, every webhook as before")
		after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces), f.Namespaces...)
		if diff := snapshot.Diff(sourceBefore, after); diff != "" {
			t.Fatalf("the target differs from the source before the move:\n%s", diff)
		}
		warnings := strings.Join(done.Status.Plan.Warnings, "\n")
		g.Expect(warnings).To(ContainSubstring("cluster-api-operator (Deployment " + operators["source"].operator.Key.String() + ")"))
	})
}

// The real cluster-api-operator started in the middle of a move (an
// upgrade, a GitOps tool re-applying its Deployment, a user) scales the
// providers it installed back up within a second, as it does whenever it
// starts; the move, which checks before its point of no return that what
// it stopped is still stopped, rolls back and deletes nothing. Its
// resync cannot come during a move: it is stopped first, and a resync
// needs it running, so a start is the case to show.
func TestTheRealClusterAPIOperatorStartedMidMoveRollsTheMoveBack(t *testing.T) {
	source := startRealOperator(t, movetest.Env.Source)
	startRealOperator(t, movetest.Env.Target)
	rc := movetest.NewRollbackCase(t, "realcapioprestart")
	ctx := context.Background()
	infra := source.deployment(source.providers[1])
	var once sync.Once
	var restartedInfra atomic.Bool
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, _ client.Object) {
		if cluster != "target" || verb != "create" {
			return // the first create in the target is Copying's
		}
		once.Do(func() {
			if err := setReplicas(ctx, movetest.Env.Source, source.operator.Key, 1); err != nil {
				t.Errorf("starting cluster-api-operator behind the move's back: %v", err)
				return
			}
			// The move waits here, in the middle of Copying, for what
			// cluster-api-operator does when it starts.
			wait, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			for wait.Err() == nil && !restartedInfra.Load() {
				d := &appsv1.Deployment{}
				restartedInfra.Store(movetest.Env.Source.Client.Get(wait, infra, d) == nil && ptr.Deref(d.Spec.Replicas, 1) > 0)
				time.Sleep(100 * time.Millisecond)
			}
		})
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "real-capi-operator-restart", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonControllerRestarted)
	g := NewWithT(t)
	g.Expect(restartedInfra.Load()).To(BeTrue(), "cluster-api-operator, started, scaled %s up (its log: %s)", infra, source.operator.LogPath)
	failed := movetest.Get(g, mo)
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(infra.String() + " (scaled up to 2)"))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(source.operator.Key.String() + " (scaled up to 1)"))
	for _, p := range failed.Status.PhaseTransitions {
		g.Expect(p.Phase).NotTo(Equal(movev1alpha1.PhaseDeleting), "nothing is deleted")
	}
	g.Expect(source.operator.WaitRunning(ctx, true)).To(Succeed())
	source.waitInstalled(t, ctx)
}
