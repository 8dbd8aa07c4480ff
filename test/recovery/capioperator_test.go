//go:build cluster

package recovery_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capioperator"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// Management setups installed the cluster-api-operator way: its CRDs from
// its pinned Go module, a provider object per provider, and no clusterctl
// inventory. The shared clusters have one (the harness installs Cluster
// API as clusterctl does): these tests hide it, and put it back after.
//
// The tests in this file use a stand-in for cluster-api-operator
// (capioperator.StandIn), which scales a provider it finds at zero back up
// at once while it runs; capioperator_real_test.go runs the real one. The
// real one does that only when it starts, resyncs (10 minutes) or sees a
// provider object change, so a manager left running while the providers
// stop, or started before they are back, would show in a test only if one
// of those fell inside the window: the stand-in shows it every time. The
// stand-in also plays what the real one cannot: managers other than
// cluster-api-operator (Rancher Turtles, a platform's own), found by name
// only, and a repackaged cluster-api-operator found by its webhooks alone.

// installTheCAPIOperatorWay turns both clusters into setups installed by
// cluster-api-operator until the test ends, and returns the provider
// objects it created per cluster (by name: "source", "target").
func installTheCAPIOperatorWay(t *testing.T) map[string][]capioperator.Provider {
	t.Helper()
	movetest.EnsureSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := map[string][]capioperator.Provider{}
	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		if err := capioperator.InstallCRDs(ctx, m.Config); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		inventory := hideInventory(t, m)
		var providers []capioperator.Provider
		for _, p := range inventory {
			providerName, _, _ := unstructured.NestedString(p.Object, "providerName")
			typ, _, _ := unstructured.NestedString(p.Object, "type")
			version, _, _ := unstructured.NestedString(p.Object, "version")
			providers = append(providers, capioperator.Provider{Kind: typ, Namespace: p.GetNamespace(), Name: providerName, Version: version})
		}
		if len(providers) != len(m.CAPI.Providers) {
			t.Fatalf("%s: the inventory holds %d providers, the installation %d", m.Name, len(providers), len(m.CAPI.Providers))
		}
		if err := capioperator.CreateProviders(ctx, m.Client, providers); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := capioperator.DeleteProviders(ctx, m.Client, providers); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
		})
		out[m.Name] = providers
	}
	return out
}

// hideInventory deletes clusterctl's inventory from a cluster until the test
// ends, and returns what it held.
func hideInventory(t *testing.T, m *testenv.Management) []unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterctlv1.GroupVersion.WithKind("ProviderList"))
	if err := m.Client.List(ctx, list); err != nil {
		t.Fatalf("listing clusterctl's inventory in %s: %v", m.Name, err)
	}
	for i := range list.Items {
		if err := m.Client.Delete(ctx, &list.Items[i]); err != nil {
			t.Fatalf("hiding clusterctl's inventory in %s: %v", m.Name, err)
		}
	}
	t.Cleanup(func() {
		for _, p := range list.Items {
			o := p.DeepCopy()
			o.SetResourceVersion("")
			o.SetUID("")
			o.SetCreationTimestamp(metav1.Time{})
			o.SetManagedFields(nil)
			if err := m.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("putting clusterctl's inventory back in %s: %v", m.Name, err)
			}
		}
	})
	return list.Items
}

// startStandIn runs a stand-in for cluster-api-operator (or another
// manager of the providers) in a cluster until the test ends, and waits
// until it runs.
func startStandIn(t *testing.T, m *testenv.Management, key types.NamespacedName, labels map[string]string) *capioperator.StandIn {
	t.Helper()
	ctx := context.Background()
	s, err := capioperator.StartStandIn(ctx, m.Client, key, capioperator.StandInOptions{Labels: labels, ProviderLabel: capiprovider.ProviderLabel})
	if err != nil {
		t.Fatalf("%s: %v", m.Name, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("%s: stopping the stand-in %s: %v", m.Name, key, err)
		}
	})
	NewWithT(t).Eventually(s.Running).WithContext(ctx).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).
		Should(BeTrue(), "%s: the stand-in %s must get a Ready pod", m.Name, key)
	return s
}

// namespaceInBoth creates a namespace of one name in both clusters, deleted
// when the test ends.
func namespaceInBoth(t *testing.T, prefix string) string {
	t.Helper()
	name := prefix + "-" + rand.String(5)
	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := m.Client.Create(context.Background(), ns); err != nil {
			t.Fatalf("creating namespace %s in %s: %v", name, m.Name, err)
		}
		t.Cleanup(func() { _ = m.Client.Delete(context.Background(), ns) })
	}
	return name
}

// serveOperatorWebhooks makes the stand-in's Deployment look like a
// repackaged cluster-api-operator, found by the webhooks of its API group
// rather than by its installers' label: a Service selecting its pods, and a
// validating webhook for the provider objects pointing at that Service.
// Nothing answers there; failurePolicy Ignore keeps the provider objects
// writable.
func serveOperatorWebhooks(t *testing.T, m *testenv.Management, s *capioperator.StandIn, podLabels map[string]string) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Key.Namespace, Name: "webhook-service"},
		Spec:       corev1.ServiceSpec{Selector: podLabels, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if err := m.Client.Create(ctx, svc); err != nil {
		t.Fatalf("%s: creating the stand-in's webhook Service: %v", m.Name, err)
	}
	resources := make([]string, 0, len(capioperator.Kinds))
	for _, k := range capioperator.Kinds {
		resources = append(resources, strings.ToLower(k)+"s")
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-operator-validating-" + rand.String(5)},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vprovider.operator.cluster.x-k8s.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: svc.Namespace, Name: svc.Name, Path: ptr.To("/validate")}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{capioperator.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: resources}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](1),
		}},
	}
	if err := m.Client.Create(ctx, cfg); err != nil {
		t.Fatalf("%s: creating the stand-in's webhook configuration: %v", m.Name, err)
	}
	t.Cleanup(func() { _ = m.Client.Delete(context.Background(), cfg) })
}

// downMonitor checks, while a MoveOperation is in Copying or Deleting, that
// no provider and no manager of either cluster runs: no provider serves
// (the harness serves a provider's webhooks exactly while its Deployment
// has a Ready pod), none has replicas, and no manager runs.
type downMonitor struct {
	mu         sync.Mutex
	samples    int
	violations []string
}

// runner is a manager a test runs: a stand-in or the real
// cluster-api-operator.
type runner interface {
	Running(ctx context.Context) (bool, error)
}

func monitorDown[M runner](ctx context.Context, mo *movev1alpha1.MoveOperation, managers map[string]M) *downMonitor {
	dm := &downMonitor{}
	inWindow := func() bool {
		got := &movev1alpha1.MoveOperation{}
		if err := movetest.Client.Get(ctx, client.ObjectKeyFromObject(mo), got); err != nil {
			return false
		}
		return got.Status.Phase == movev1alpha1.PhaseCopying || got.Status.Phase == movev1alpha1.PhaseDeleting
	}
	go func() {
		for ctx.Err() == nil {
			// The phase only moves forward: in the window before and after
			// the look means in the window during it.
			if inWindow() {
				var seen []string
				for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
					for _, p := range m.CAPI.Providers {
						if p.Serving() {
							seen = append(seen, fmt.Sprintf("%s: provider %s has a Ready pod", m.Name, p.Name))
						}
					}
					list := &appsv1.DeploymentList{}
					if err := m.Client.List(ctx, list, client.HasLabels{capiprovider.ProviderLabel}); err == nil {
						for _, d := range list.Items {
							if n := ptr.Deref(d.Spec.Replicas, 1); n > 0 {
								seen = append(seen, fmt.Sprintf("%s: provider Deployment %s/%s is at %d replicas", m.Name, d.Namespace, d.Name, n))
							}
						}
					}
				}
				for name, s := range managers {
					if running, err := s.Running(ctx); err == nil && running {
						seen = append(seen, fmt.Sprintf("manager %s runs", name))
					}
				}
				if inWindow() {
					dm.mu.Lock()
					dm.samples++
					dm.violations = append(dm.violations, seen...)
					dm.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return dm
}

// doneWhileDown waits until the move is Done, watching that nothing runs
// while it copies and deletes.
func doneWhileDown[M runner](t *testing.T, ctx context.Context, mo *movev1alpha1.MoveOperation, managers map[string]M, timeout time.Duration) (*movev1alpha1.MoveOperation, *downMonitor) {
	t.Helper()
	monitorCtx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	monitor := monitorDown(monitorCtx, mo, managers)
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, timeout)
	return done, monitor
}

// assertNothingRan fails the test when the monitor saw anything run, or
// never looked.
func (dm *downMonitor) assertNothingRan(t *testing.T) {
	t.Helper()
	samples, violations := dm.result()
	if len(violations) > 0 {
		t.Fatalf("seen in Copying or Deleting:\n%s", strings.Join(violations, "\n"))
	}
	if samples == 0 {
		t.Fatalf("the monitor never looked during Copying or Deleting: it shows nothing")
	}
	t.Logf("looked %d times during Copying and Deleting", samples)
}

func (dm *downMonitor) result() (int, []string) {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	return dm.samples, append([]string(nil), dm.violations...)
}

// replicaWrites records, in the order the operator made them, the writes
// that changed a Deployment's replica count from zero or to zero.
type replicaWrites struct {
	mu    sync.Mutex
	last  map[string]int32
	order []replicaChange
}

type replicaChange struct {
	cluster string
	key     types.NamespacedName
	up      bool
}

func (w *replicaWrites) observe(cluster, _ string, obj client.Object) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]int32{}
	}
	id := cluster + " " + client.ObjectKeyFromObject(d).String()
	n := ptr.Deref(d.Spec.Replicas, 1)
	if prev, seen := w.last[id]; seen && (prev == 0) != (n == 0) {
		w.order = append(w.order, replicaChange{cluster: cluster, key: client.ObjectKeyFromObject(d), up: n > 0})
	}
	w.last[id] = n
}

func (w *replicaWrites) changes() []replicaChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]replicaChange(nil), w.order...)
}

// A management setup installed by cluster-api-operator moves: its
// providers are checked through its provider objects (there is no
// clusterctl inventory), and cluster-api-operator is stopped before the
// providers and restarted after them, in both clusters, so that it cannot
// undo the move. So is a manager the user names in spec.controllers.
// Stand-ins, which scale any provider they find at zero back up at once:
// a wrong order fails here every time; a repackaged cluster-api-operator
// (found by its webhooks) and Rancher Turtles (found by name) have no real
// counterpart in the test clusters.
func TestAMoveOfASetupInstalledByClusterAPIOperatorIsNotUndoneByIt(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	installTheCAPIOperatorWay(t)
	name := "capiop" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})

	// cluster-api-operator in the source as its installers leave it
	// (labelled); in the target repackaged, without the label, known only
	// by the webhooks of its API group.
	sourceOperator := startStandIn(t, movetest.Env.Source, types.NamespacedName{Namespace: testenv.NewNamespace(t, movetest.Env.Source, "capi-operator-system"), Name: "capi-operator-controller-manager"}, nil)
	repackaged := map[string]string{"app.kubernetes.io/name": "platform-capi-operator"}
	targetOperator := startStandIn(t, movetest.Env.Target, types.NamespacedName{Namespace: testenv.NewNamespace(t, movetest.Env.Target, "platform-system"), Name: "platform-capi-operator"}, repackaged)
	serveOperatorWebhooks(t, movetest.Env.Target, targetOperator, map[string]string{"app": "stand-in-" + targetOperator.Key.Name})
	// A manager of the user's own (say Rancher Turtles) that does the same,
	// found by nothing but its name in spec.controllers.additional.
	turtlesNS := namespaceInBoth(t, "rancher-turtles-system")
	turtles := map[string]*capioperator.StandIn{}
	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		turtles[m.Name] = startStandIn(t, m, types.NamespacedName{Namespace: turtlesNS, Name: "rancher-turtles-controller-manager"}, map[string]string{"app.kubernetes.io/name": "rancher-turtles"})
	}

	// The stand-ins work: a provider scaled to zero comes back.
	infra := movetest.Env.Source.CAPI.Provider(capiprovider.LoopInfrastructureProvider)
	infraKey := types.NamespacedName{Namespace: infra.Namespace, Name: infra.Deployment}
	scaleDeployment(ctx, g, movetest.Env.Source, infraKey, 0)
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(movetest.Env.Source.Client.Get(ctx, infraKey, d)).To(Succeed())
		g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)))
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "a stand-in must scale the provider it finds at zero back up")
	// A stand-in notes its scale-up once its write has returned, which on a
	// busy machine can come after the Deployment is seen back: wait for the
	// note, and say what the stand-ins' loops met if it does not come.
	g.Eventually(func() int {
		return len(sourceOperator.ScaleUps()) + len(turtles["source"].ScaleUps())
	}, 10*time.Second, 50*time.Millisecond).Should(BeNumerically(">", 0), func() string {
		return fmt.Sprintf("the provider came back, so a stand-in must have scaled it up (their last errors: %v; %v)",
			sourceOperator.Err(), turtles["source"].Err())
	})

	stateBefore := movetest.StateOf(ctx, g)
	sourceBefore := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces), f.Namespaces...)
	standIns := map[string]*capioperator.StandIn{
		"source cluster-api-operator": sourceOperator, "target cluster-api-operator": targetOperator,
		"source turtles": turtles["source"], "target turtles": turtles["target"],
	}
	scaleUpsBefore := map[string]int{}
	for n, s := range standIns {
		scaleUpsBefore[n] = len(s.ScaleUps())
	}

	writes := &replicaWrites{}
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: writes.observe})
	ns := movetest.OpsNamespace(t)
	mo := movetest.NewMoveOperation(t, ns, "capi-operator", movev1alpha1.MoveOperationSpec{
		Target:     movetest.TargetRef("target"),
		Namespaces: f.Namespaces,
		Controllers: movev1alpha1.ControllersSpec{Additional: []movev1alpha1.AdditionalController{
			{Cluster: movev1alpha1.ControllerInBoth, Namespace: turtlesNS, Name: "rancher-turtles-controller-manager"},
		}},
	})
	done, monitor := doneWhileDown(t, ctx, mo, standIns, 5*time.Minute)

	t.Run("no provider and no manager ran while objects were copied and deleted", func(t *testing.T) {
		monitor.assertNothingRan(t)
		for n, s := range standIns {
			if ups := s.ScaleUps()[scaleUpsBefore[n]:]; len(ups) > 0 {
				t.Errorf("the stand-in %s scaled providers up during the move: %v", n, ups)
			}
			if err := s.Err(); err != nil {
				t.Errorf("the stand-in %s failed: %v", n, err)
			}
		}
	})

	t.Run("the managers stop before the providers and start after them", func(t *testing.T) {
		g := NewWithT(t)
		isManager, managers := managersOf(done)
		g.Expect(managers).To(ConsistOf(
			"source "+sourceOperator.Key.String(), "target "+targetOperator.Key.String(),
			"source "+turtles["source"].Key.String(), "target "+turtles["target"].Key.String(),
		), "status.controllers flags the managers")
		g.Expect(done.Status.Controllers).To(HaveLen(len(managers)+len(movetest.Env.Source.CAPI.Providers)+len(movetest.Env.Target.CAPI.Providers)),
			"status.controllers lists every provider and manager of both clusters")

		assertManagersAroundProviders(t, writes, isManager, 2, "source", "target")
	})

	t.Run("everything is back as before, and the fleet is in the target", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "the providers' replicas and every webhook, the stand-in's included, are as before")
		for n, s := range standIns {
			m := movetest.Env.Source
			if strings.HasPrefix(n, "target") {
				m = movetest.Env.Target
			}
			d := &appsv1.Deployment{}
			g.Expect(m.Client.Get(ctx, s.Key, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)), "%s is restored", n)
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1), "%s is Available", n)
			g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation), "%s: the record is dropped", n)
		}
		after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces), f.Namespaces...)
		if diff := snapshot.Diff(sourceBefore, after); diff != "" {
			t.Fatalf("the target differs from the source before the move:\n%s", diff)
		}
		warnings := strings.Join(done.Status.Plan.Warnings, "\n")
		g.Expect(warnings).To(ContainSubstring("cluster-api-operator (Deployment " + sourceOperator.Key.String() + ")"))
		g.Expect(warnings).To(ContainSubstring("cluster-api-operator (Deployment " + targetOperator.Key.String() + ")"))
	})
}

// managersOf reads status.controllers: which entry ("<cluster>
// <namespace>/<name>") is a manager, and the managers.
func managersOf(mo *movev1alpha1.MoveOperation) (map[string]bool, []string) {
	isManager := map[string]bool{}
	var managers []string
	for _, c := range mo.Status.Controllers {
		id := strings.ToLower(string(c.Cluster)) + " " + c.Namespace + "/" + c.Name
		isManager[id] = c.Manager
		if c.Manager {
			managers = append(managers, id)
		}
	}
	return isManager, managers
}

// assertManagersAroundProviders checks, from the operator's writes, that in
// each cluster every manager went to zero before the first provider did,
// and came back after the last provider did; and that each of the cluster's
// managers (isManager says which are, by "<cluster> <namespace>/<name>")
// went down and came back exactly once.
func assertManagersAroundProviders(t *testing.T, writes *replicaWrites, isManager map[string]bool, managersPerCluster int, clusters ...string) {
	t.Helper()
	g := NewWithT(t)
	changes := writes.changes()
	for _, cluster := range clusters {
		lastManagerDown, firstProviderDown, lastProviderUp, firstManagerUp := -1, -1, -1, -1
		downs, ups := 0, 0
		for i, ch := range changes {
			if ch.cluster != cluster {
				continue
			}
			manager := isManager[cluster+" "+ch.key.String()]
			switch {
			case !ch.up && manager:
				lastManagerDown = i
				downs++
			case !ch.up && firstProviderDown < 0:
				firstProviderDown = i
			case ch.up && !manager:
				lastProviderUp = i
			case ch.up && manager:
				if firstManagerUp < 0 {
					firstManagerUp = i
				}
				ups++
			}
		}
		g.Expect(downs).To(Equal(managersPerCluster), "%s: each manager is scaled down once", cluster)
		g.Expect(ups).To(Equal(managersPerCluster), "%s: each manager is scaled up once", cluster)
		g.Expect(firstProviderDown).To(BeNumerically(">", lastManagerDown), "%s: the first provider stops after the last manager", cluster)
		g.Expect(firstManagerUp).To(BeNumerically(">", lastProviderUp), "%s: the first manager starts after the last provider", cluster)
	}
}

func scaleDeployment(ctx context.Context, g Gomega, m *testenv.Management, key types.NamespacedName, n int32) {
	g.Expect(setReplicas(ctx, m, key, n)).To(Succeed())
}

// setReplicas scales a Deployment of m to n; it returns the error instead
// of failing, for the callbacks the operator's writes call, which run
// outside the test's goroutine.
func setReplicas(ctx context.Context, m *testenv.Management, key types.NamespacedName, n int32) error {
	d := &appsv1.Deployment{}
	if err := m.Client.Get(ctx, key, d); err != nil {
		return fmt.Errorf("getting %s: %w", key, err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(n)
	return m.Client.Patch(ctx, d, patch)
}

// Without clusterctl's inventory, the providers are compared through
// cluster-api-operator's provider objects, as clusterctl move compares its
// inventories: each provider of the source must be in the target, at the
// same version or a newer one.
func TestTheProviderCheckComparesClusterAPIOperatorsProvidersWithoutAnInventory(t *testing.T) {
	providers := installTheCAPIOperatorWay(t)
	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := movetest.OpsNamespace(t)
	ctx := context.Background()

	var infra capioperator.Provider
	for _, p := range providers["target"] {
		if p.Kind == "InfrastructureProvider" {
			infra = p
		}
	}
	if infra.Name == "" {
		t.Fatalf("no InfrastructureProvider among %v", providers["target"])
	}
	setTargetInfra := func(t *testing.T, version string) {
		t.Helper()
		if err := capioperator.DeleteProviders(ctx, movetest.Env.Target.Client, []capioperator.Provider{infra}); err != nil {
			t.Fatal(err)
		}
		if version == "" {
			return
		}
		p := infra
		p.Version = version
		if err := capioperator.CreateProviders(ctx, movetest.Env.Target.Client, []capioperator.Provider{p}); err != nil {
			t.Fatal(err)
		}
	}
	dryRun := func(t *testing.T, name string) *movev1alpha1.MoveOperation {
		return movetest.NewMoveOperation(t, ns, name, movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), DryRun: true, Namespaces: []string{ns}})
	}

	t.Run("matching provider objects pass", func(t *testing.T) {
		movetest.WaitForPhase(t, dryRun(t, "matching"), movev1alpha1.PhaseDone, time.Minute)
	})
	for _, tc := range []struct {
		name, version, message string
	}{
		{"a provider the target lacks is named", "", fmt.Sprintf("InfrastructureProvider %s (%s in the source) is not installed in the target", infra.Name, infra.Version)},
		{"an older provider in the target is named", "v0.0.1", fmt.Sprintf("InfrastructureProvider %s is older in the target (v0.0.1) than in the source (%s)", infra.Name, infra.Version)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setTargetInfra(t, tc.version)
			failed, _ := movetest.WaitForPhase(t, dryRun(t, "mismatch-"+rand.String(4)), movev1alpha1.PhaseFailed, time.Minute)
			g := NewWithT(t)
			g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonProviderMissing))
			g.Expect(failed.Status.FailureMessage).To(ContainSubstring(tc.message))
		})
	}
	t.Run("a newer provider in the target passes", func(t *testing.T) {
		setTargetInfra(t, "v9.0.0")
		movetest.WaitForPhase(t, dryRun(t, "newer"), movev1alpha1.PhaseDone, time.Minute)
	})
	setTargetInfra(t, infra.Version)
}

// A Deployment named in spec.controllers.additional that does not exist in
// a cluster it is named for fails Validating, naming it: a manager the user
// wants stopped and the move cannot find would go on running.
func TestANamedControllerThatDoesNotExistFailsValidation(t *testing.T) {
	movetest.EnsureSetup(t)
	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := movetest.OpsNamespace(t)
	// It exists in the source only; it is named for both.
	sourceOnly := testenv.NewNamespace(t, movetest.Env.Source, "turtles")
	startStandIn(t, movetest.Env.Source, types.NamespacedName{Namespace: sourceOnly, Name: "turtles"}, map[string]string{"app.kubernetes.io/name": "turtles"})
	mo := movetest.NewMoveOperation(t, ns, "missing-manager", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), DryRun: true, Namespaces: []string{ns},
		Controllers: movev1alpha1.ControllersSpec{Additional: []movev1alpha1.AdditionalController{
			{Cluster: movev1alpha1.ControllerInBoth, Namespace: sourceOnly, Name: "turtles"},
		}},
	})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, time.Minute)
	g := NewWithT(t)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonControllerNotFound))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("Deployment %s/turtles in the target cluster, which does not exist there", sourceOnly)))
}

// A move rolled back restores the managers as a completed move does:
// after the providers, in both clusters, at their replica counts. With
// stand-ins: one started before the providers are back would scale them up
// at once, and the test would see it.
func TestARolledBackMoveRestartsTheManagersAfterTheProviders(t *testing.T) {
	installTheCAPIOperatorWay(t)
	sourceOperator := startStandIn(t, movetest.Env.Source, types.NamespacedName{Namespace: testenv.NewNamespace(t, movetest.Env.Source, "capi-operator-system"), Name: "capi-operator-controller-manager"}, nil)
	targetOperator := startStandIn(t, movetest.Env.Target, types.NamespacedName{Namespace: testenv.NewNamespace(t, movetest.Env.Target, "capi-operator-system"), Name: "capi-operator-controller-manager"}, nil)
	platformNS := testenv.NewNamespace(t, movetest.Env.Source, "platform")
	platform := startStandIn(t, movetest.Env.Source, types.NamespacedName{Namespace: platformNS, Name: "platform-manager"}, map[string]string{"app.kubernetes.io/name": "platform"})
	standIns := map[string]*capioperator.StandIn{"source cluster-api-operator": sourceOperator, "target cluster-api-operator": targetOperator, "source platform": platform}
	rc := movetest.NewRollbackCase(t, "capiopback")
	ctx := context.Background()
	ns, clusterName := rc.Fleet.Clusters[0].Namespace, rc.Fleet.Clusters[0].Name
	scaleUpsBefore := map[string]int{}
	for n, s := range standIns {
		scaleUpsBefore[n] = len(s.ScaleUps())
	}

	// Once the move has started stopping controllers, somebody creates an
	// object of the fleet in the target: copying meets it and rolls back.
	writes := &replicaWrites{}
	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		writes.observe(cluster, verb, obj)
		if _, ok := obj.(*appsv1.Deployment); !ok || cluster != "target" {
			return
		}
		once.Do(func() {
			_ = movetest.Env.Target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			_ = movetest.Env.Target.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName + "-kubeconfig"},
				StringData: map[string]string{"value": "not the moved one"}})
		})
	}})
	t.Cleanup(func() {
		_ = movetest.Env.Target.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName + "-kubeconfig"}})
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "capi-operator-rollback", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Controllers: movev1alpha1.ControllersSpec{Additional: []movev1alpha1.AdditionalController{
			{Cluster: movev1alpha1.ControllerInSource, Namespace: platformNS, Name: "platform-manager"},
		}},
	})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonTargetConflict)

	g := NewWithT(t)
	failed := movetest.Get(g, mo)
	isManager, managers := managersOf(failed)
	g.Expect(managers).To(ConsistOf("source "+sourceOperator.Key.String(), "target "+targetOperator.Key.String(), "source "+platform.Key.String()))
	t.Run("the managers stop before the providers and start after them", func(t *testing.T) {
		assertManagersAroundProviders(t, writes, isManager, 2, "source") // cluster-api-operator and the platform's
		assertManagersAroundProviders(t, writes, isManager, 1, "target")
	})
	for n, s := range standIns {
		g.Expect(s.ScaleUps()[scaleUpsBefore[n]:]).To(BeEmpty(), "the stand-in %s never found a provider at zero while it ran", n)
		m := movetest.Env.Source
		if strings.HasPrefix(n, "target") {
			m = movetest.Env.Target
		}
		d := &appsv1.Deployment{}
		g.Expect(m.Client.Get(ctx, s.Key, d)).To(Succeed())
		g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)), "%s is restored", n)
		g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation), "%s: the record is dropped", n)
	}
}

// A manager the move was not told of, scaling a provider back up while
// objects are copied, is caught before the point of no return: the move
// rolls back instead of deleting the source's objects under a running
// provider.
func TestAProviderScaledUpBehindTheMovesBackRollsTheMoveBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "restarted")
	ctx := context.Background()
	infra := movetest.Env.Source.CAPI.Provider(capiprovider.LoopInfrastructureProvider)
	infraKey := types.NamespacedName{Namespace: infra.Namespace, Name: infra.Deployment}
	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		if cluster != "target" || verb != "create" {
			return // the first create in the target is Copying's
		}
		once.Do(func() {
			if err := setReplicas(ctx, movetest.Env.Source, infraKey, 1); err != nil {
				t.Errorf("scaling %s up behind the move's back: %v", infraKey, err)
			}
		})
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "restarted", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonControllerRestarted)
	g := NewWithT(t)
	failed := movetest.Get(g, mo)
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("in the source cluster " + infraKey.String() + " (scaled up to 1)"))
	for _, p := range failed.Status.PhaseTransitions {
		g.Expect(p.Phase).NotTo(Equal(movev1alpha1.PhaseDeleting), "nothing is deleted")
	}
}

// The operator crashes before each of its writes to a manager's Deployment
// (recording, stopping, restarting, forgetting) and before the first
// provider of each cluster stops and starts; a fresh one resumes each time.
// The move still ends Done with every manager back at its count, and no
// manager or provider ran while objects were copied and deleted. With
// stand-ins: a resumed move that restarted a manager too early would have a
// provider scaled up at once, not at the real one's next start or resync.
func TestAMoveWithManagersFinishesAfterACrashBeforeEachOfTheirWrites(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	installTheCAPIOperatorWay(t)
	standIns := map[string]*capioperator.StandIn{
		"source cluster-api-operator": startStandIn(t, movetest.Env.Source, types.NamespacedName{Namespace: testenv.NewNamespace(t, movetest.Env.Source, "capi-operator-system"), Name: "capi-operator-controller-manager"}, nil),
		"target cluster-api-operator": startStandIn(t, movetest.Env.Target, types.NamespacedName{Namespace: testenv.NewNamespace(t, movetest.Env.Target, "capi-operator-system"), Name: "capi-operator-controller-manager"}, nil),
	}
	turtlesNS := namespaceInBoth(t, "rancher-turtles-system")
	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		standIns[m.Name+" turtles"] = startStandIn(t, m, types.NamespacedName{Namespace: turtlesNS, Name: "rancher-turtles-controller-manager"}, map[string]string{"app.kubernetes.io/name": "rancher-turtles"})
	}
	managers := map[string]bool{}
	for n, s := range standIns {
		managers[strings.Fields(n)[0]+" "+s.Key.String()] = true
	}
	name := "capiopcrash" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})
	stateBefore := movetest.StateOf(ctx, g)
	before := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces), f.Namespaces...)
	scaleUpsBefore := map[string]int{}
	for n, s := range standIns {
		scaleUpsBefore[n] = len(s.ScaleUps())
	}

	// Each crash point once: every write to a manager's Deployment
	// (record, stop, restart, forget), and the same writes to the first
	// provider of each cluster that makes them.
	var mu sync.Mutex
	crashed := map[string]bool{}
	stopped := map[string]bool{}
	crashIf := func(w movetest.PendingWrite) bool {
		d, ok := w.Obj.(*appsv1.Deployment)
		if !ok {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		id := w.Cluster + " " + client.ObjectKeyFromObject(d).String()
		_, recorded := d.Annotations[movev1alpha1.OriginalReplicasAnnotation]
		var stage string
		switch {
		case ptr.Deref(d.Spec.Replicas, 1) == 0:
			stage = "stop"
			stopped[id] = true
		case stopped[id] && recorded:
			stage = "restart"
		case stopped[id]:
			stage = "forget"
		default:
			stage = "record"
		}
		point := id + ": " + stage
		if !managers[id] {
			point = w.Cluster + " a provider: " + stage
		}
		if crashed[point] {
			return false
		}
		crashed[point] = true
		return true
	}
	opts := movetest.OperatorOptions{CrashIf: crashIf}
	op := movetest.StartOperator(t, opts)
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "crashes", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: f.Namespaces,
		Controllers: movev1alpha1.ControllersSpec{Additional: []movev1alpha1.AdditionalController{
			{Namespace: turtlesNS, Name: "rancher-turtles-controller-manager"},
		}},
	})
	resumer := movetest.StartResumer(t, op, opts)
	monitorCtx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	monitor := monitorDown(monitorCtx, mo, standIns)
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 6*time.Minute)
	stopMonitor()

	mu.Lock()
	points := make([]string, 0, len(crashed))
	for p := range crashed {
		points = append(points, p)
	}
	mu.Unlock()
	sort.Strings(points)
	t.Logf("crashed before %d writes:\n%s", len(points), strings.Join(points, "\n"))
	// Record, stop, restart and forget: per manager, and per cluster for a provider.
	g.Expect(points).To(HaveLen(4*len(standIns)+2*4), "every crash point was reached")

	_, managersInStatus := managersOf(done)
	g.Expect(managersInStatus).To(HaveLen(len(standIns)), "every manager is recorded as one")
	samples, violations := monitor.result()
	g.Expect(violations).To(BeEmpty(), "nothing ran while objects were copied and deleted")
	g.Expect(samples).To(BeNumerically(">", 0), "the monitor looked during Copying or Deleting")
	for n, s := range standIns {
		g.Expect(s.ScaleUps()[scaleUpsBefore[n]:]).To(BeEmpty(), "the stand-in %s never found a provider at zero while it ran", n)
		m := movetest.Env.Source
		if strings.HasPrefix(n, "target") {
			m = movetest.Env.Target
		}
		d := &appsv1.Deployment{}
		g.Expect(m.Client.Get(ctx, s.Key, d)).To(Succeed())
		g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)), "%s is restored", n)
		g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation), "%s: the record is dropped", n)
	}
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "providers and webhooks are as before")
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, f.Namespaces), f.Namespaces...)
	if diff := snapshot.Diff(before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	movetest.DeleteMoveOperation(t, mo)
	resumer.Stop()
}
