//go:build cluster

package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/move-operator/move-operator/test/capioperator"
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
// an InfrastructureProvider (sample, infraReplicas) from ConfigMaps; it
// returns once it reports both installed and Ready.
func startRealOperator(t *testing.T, m *testenv.Management, infraReplicas int32, opts capioperator.RealOptions) *realOperator {
	t.Helper()
	ensureSetup(t)
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
			Deployment: "capsample-controller-manager", Replicas: infraReplicas},
	}}
	key := types.NamespacedName{Namespace: testenv.NewNamespace(t, m, "capi-operator-system"), Name: "capi-operator-controller-manager"}
	t.Cleanup(func() {
		// It is stopped by now (cleanups run last first): its finalizers
		// would hold the provider objects and their namespaces.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var providers []capioperator.Provider
		for _, p := range ro.providers {
			providers = append(providers, p.Provider)
		}
		if err := capioperator.ReleaseProviders(ctx, m.Client, providers); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	})
	op, err := capioperator.StartReal(ctx, m.Cluster, m.Client, key, opts)
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
	ro := startRealOperator(t, env.Source, 2, capioperator.RealOptions{})
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
}
