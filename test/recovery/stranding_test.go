//go:build cluster

package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// A provider that its owner keeps at zero replicas serves no webhooks before
// the move; the move must neither stall on it nor start it.
func TestAMoveCompletesWithAProviderAlreadyAtZeroInEitherClusterAndLeavesItThere(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "atzero")
	ctx := context.Background()
	g := NewWithT(t)

	// The core provider serves the webhooks of every Cluster, Machine and
	// MachineDeployment: at zero in the source, the move's pause
	// meets them; at zero in the target, the unpause does.
	movetest.SetProviderReplicas(t, movetest.Env.Source, capiprovider.CoreProvider, 0)
	movetest.SetProviderReplicas(t, movetest.Env.Target, capiprovider.CoreProvider, 0)
	g.Expect(movetest.Env.Source.CAPI.Provider(capiprovider.CoreProvider).WaitServing(ctx, false)).To(Succeed())
	g.Expect(movetest.Env.Target.CAPI.Provider(capiprovider.CoreProvider).WaitServing(ctx, false)).To(Succeed())
	stateBefore := movetest.StateOf(ctx, g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, rc.Ops, "at-zero", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	for _, c := range done.Status.Controllers {
		if c.Name == movetest.Env.Source.CAPI.Provider(capiprovider.CoreProvider).Deployment {
			g.Expect(c.OriginalReplicas).To(BeZero(), "%s %s/%s was recorded at zero", c.Cluster, c.Namespace, c.Name)
		}
	}
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore), "the providers at zero stay at zero, the others come back, the webhooks are as before")
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, rc.Fleet.Namespaces)

	// Bring the core providers back before the fleet is purged: deleting
	// Clusters goes through their webhooks.
	movetest.SetProviderReplicas(t, movetest.Env.Source, capiprovider.CoreProvider, 1)
	movetest.SetProviderReplicas(t, movetest.Env.Target, capiprovider.CoreProvider, 1)
}

// Two MoveOperations created in the same second, the first one's status
// write slow: a check of the other MoveOperations in a cache would let both
// start; the claim lets exactly one move at a time.
func TestOnlyOneMoveOperationIsActiveEvenWhenStatusWritesAreSlow(t *testing.T) {
	movetest.EnsureSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := NewWithT(t)
	ns := movetest.OpsNamespace(t)
	// Both fail in Validating, so the test is quick; the first has begun to
	// move (it left Pending) long before.
	spec := movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: []string{"no-such-namespace"}}

	timeline := watchPhases(ctx, t, ns)

	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{FailIf: func(_, verb string, obj client.Object) error {
		mo, ok := obj.(*movev1alpha1.MoveOperation)
		if !ok || verb != "patch/status" || mo.Name != "zz-first" || mo.Status.Phase != movev1alpha1.PhaseValidating {
			return nil
		}
		once.Do(func() {
			// While the first one's move to Validating is being written,
			// the second one appears, named to sort first.
			movetest.NewMoveOperation(t, ns, "aa-second", spec)
			time.Sleep(3 * time.Second)
		})
		return nil
	}})
	// Start on a fresh second, so both are created within it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	first := movetest.NewMoveOperation(t, ns, "zz-first", spec)
	second := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aa-second"}}

	movetest.WaitForPhase(t, first, movev1alpha1.PhaseFailed, time.Minute)
	g.Eventually(func(g Gomega) {
		g.Expect(movetest.Get(g, second).Status.Phase).To(Equal(movev1alpha1.PhaseFailed))
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "the second one runs once the first has ended")
	got := movetest.Get(g, second)
	t.Logf("created %s and %s", movetest.Get(g, first).CreationTimestamp, got.CreationTimestamp)

	g.Expect(timeline.overlaps()).To(BeEmpty(), "two MoveOperations were active at once")
	g.Eventually(func() bool {
		err := movetest.Client.Get(ctx, movetest.ClaimKey, &coordinationv1.Lease{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the claim is given up once the last move's end is written")
}

// phaseTimeline is every phase change of the MoveOperations of a namespace,
// in the order the API server made them.
type phaseTimeline struct {
	mu      sync.Mutex
	phases  map[string]movev1alpha1.MovePhase
	overlap []string
}

// watchPhases records the phase changes of every MoveOperation of ns until
// the test ends; a watch delivers them in the order they were written.
func watchPhases(ctx context.Context, t *testing.T, ns string) *phaseTimeline {
	t.Helper()
	wc, err := client.NewWithWatch(movetest.Env.Source.Config, client.Options{Scheme: movetest.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &movev1alpha1.MoveOperationList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	tl := &phaseTimeline{phases: map[string]movev1alpha1.MovePhase{}}
	go func() {
		for ev := range w.ResultChan() {
			mo, ok := ev.Object.(*movev1alpha1.MoveOperation)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			tl.observe(mo.Name, mo.Status.Phase)
		}
	}()
	return tl
}

func (tl *phaseTimeline) observe(name string, phase movev1alpha1.MovePhase) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.phases[name] = phase
	var active []string
	for n, p := range tl.phases {
		if p != "" && p != movev1alpha1.PhasePending && !p.IsTerminal() {
			active = append(active, n+" in "+string(p))
		}
	}
	if len(active) > 1 {
		tl.overlap = append(tl.overlap, strings.Join(active, " and "))
	}
}

func (tl *phaseTimeline) overlaps() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.overlap...)
}

// A kubeconfig that skips TLS verification and a certificate user as the
// operator's identity do not stop a move, but the user hears of both. The
// installed operator's identities (ServiceAccounts in both clusters) raise
// no such warning.
func TestAnInsecureTargetAndASharedIdentityAreWarnedAbout(t *testing.T) {
	movetest.EnsureSetup(t)
	g := NewWithT(t)
	ns := testenv.NewNamespace(t, movetest.Env.Source, "warnings")
	// A certificate user of the target's, as many hand-made kubeconfigs hold.
	const sharedUser = "shared-move-operator"
	_, sharedPath, err := movetest.Env.Target.AddUser(sharedUser)
	g.Expect(err).NotTo(HaveOccurred())
	shared, err := os.ReadFile(sharedPath)
	g.Expect(err).NotTo(HaveOccurred())
	var insecure []string
	for _, line := range strings.Split(string(shared), "\n") {
		if indent, _, found := strings.Cut(line, "certificate-authority-data:"); found {
			line = indent + "insecure-skip-tls-verify: true"
		}
		insecure = append(insecure, line)
	}
	movetest.NewSecret(t, ns, "insecure", map[string][]byte{"value": []byte(strings.Join(insecure, "\n"))})
	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, ns, "insecure", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("insecure"), DryRun: true, Namespaces: []string{ns}})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, time.Minute)

	warnings := strings.Join(done.Status.Plan.Warnings, "\n")
	g.Expect(warnings).To(ContainSubstring("insecure-skip-tls-verify"))
	g.Expect(warnings).To(ContainSubstring(string(movev1alpha1.ClusterTarget) + ` cluster: the operator acts as "` + sharedUser + `", which is not a ServiceAccount`))
	g.Expect(warnings).NotTo(ContainSubstring(string(movev1alpha1.ClusterSource)+` cluster: the operator acts as`), "the installed operator is a ServiceAccount in the source")
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(movetest.Client.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		reasons := map[string]string{}
		for _, e := range events.Items {
			if e.Regarding.Name == mo.Name && e.Type == "Warning" {
				reasons[e.Reason] = e.Note
			}
		}
		g.Expect(reasons).To(HaveKey(movev1alpha1.ReasonInsecureTarget))
		g.Expect(reasons).To(HaveKey(movev1alpha1.ReasonSharedIdentity))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "each warning raises a Warning event")
}

// An object whose owner reference names an owner that does not exist belongs
// to no hierarchy; clusterctl leaves it behind without a word. The dry run and
// the move name it, with why, and nothing is written.
func TestAnObjectWhoseOwnerDoesNotExistIsNamedAndStopsTheMove(t *testing.T) {
	movetest.EnsureSetup(t)
	ctx := context.Background()
	g := NewWithT(t)
	ns := movetest.OpsNamespace(t)
	// Owned by a Cluster of an API version no longer served: the garbage
	// collector cannot resolve the owner, so the Secret stays for good.
	stale := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stale-kubeconfig", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "cluster.x-k8s.io/v1alpha3", Kind: "Cluster", Name: "deleted-long-ago", UID: "0e6b8a4c-0000-4000-8000-000000000001",
	}}}}
	g.Expect(movetest.Client.Create(ctx, stale)).To(Succeed())
	movetest.StartOperator(t, movetest.OperatorOptions{})

	var mos []*movev1alpha1.MoveOperation
	for _, dryRun := range []bool{true, false} {
		mo := movetest.NewMoveOperation(t, ns, fmt.Sprintf("dangling-%v", dryRun), movev1alpha1.MoveOperationSpec{
			Target: movetest.TargetRef("target"), Namespaces: []string{ns}, DryRun: dryRun,
		})
		failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonOrphanedObjects))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring("Secret " + ns + "/stale-kubeconfig"))
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring("does not exist"))
		g.Expect(failed.Status.Plan).NotTo(BeNil(), "the plan says what the move would leave out")
		g.Expect(failed.Status.Plan.Excluded).To(ContainElement(And(
			HaveField("Reason", "OwnerMissing"), HaveField("Count", int32(1)),
			HaveField("Objects", ContainElement(ContainSubstring("stale-kubeconfig")))),
		))
		mos = append(mos, mo)
	}
	movetest.AssertNothingWritten(g, mos...)
}

// Past the point of no return the move cannot roll back: with the target
// gone for longer than every timeout, it waits, says so, and finishes once
// the target is back.
func TestAMoveWaitsForATargetThatGoesAwayAfterThePointOfNoReturn(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "tgtdown")
	ctx := context.Background()
	g := NewWithT(t)
	proxy := movetest.TargetViaProxy(t, rc.Ops)

	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "source" && verb == "delete" {
			once.Do(proxy.Cut) // the target goes away as Deleting begins
		}
	}})
	// Past the point of no return only the scale-up timeout applies; the
	// outage below lasts several times longer.
	mo := movetest.NewMoveOperation(t, rc.Ops, "target-down", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("via-proxy"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{ScaleUp: &metav1.Duration{Duration: time.Second}},
	})

	g.Eventually(func(g Gomega) {
		got := movetest.Get(g, mo)
		g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhaseRestoringTarget))
		ready := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Message).To(ContainSubstring("retrying"), "the status says what the move waits for")
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := movetest.Get(g, mo)
		g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhaseRestoringTarget), "past the point of no return the move neither fails nor rolls back")
		g.Expect(got.Status.FailureReason).To(BeEmpty())
	}, 5*time.Second, 200*time.Millisecond).Should(Succeed(), "longer than every timeout of the move")
	// Past the scale-up timeout the source's controllers do not wait for the
	// target: what stays in the source must not go unmanaged meanwhile.
	g.Eventually(func(g Gomega) {
		g.Expect(sourceReplicasNow(g)).To(Equal(movetest.SourceReplicas(rc.StateBefore)))
	}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the source's controllers run again while the target is away")
	g.Expect(movetest.Get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseRestoringTarget), "the target is still away")

	proxy.Restore()
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 2*time.Minute)
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore))
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, rc.Fleet.Namespaces)
}

// sourceReplicasNow reads the replica counts of the source's providers, as
// movetest.ClusterState keys them, whatever their annotations.
func sourceReplicasNow(g Gomega) map[string]int32 {
	deployments := &appsv1.DeploymentList{}
	g.Expect(movetest.Env.Source.Client.List(context.Background(), deployments, client.HasLabels{capiprovider.ProviderLabel})).To(Succeed())
	out := map[string]int32{}
	for _, d := range deployments.Items {
		out[movetest.Env.Source.Name+" "+d.Namespace+"/"+d.Name] = ptr.Deref(d.Spec.Replicas, 1)
	}
	return out
}

// A webhook that holds the 64 match conditions the API server allows cannot
// take the bypass: the move must neither stall in ScalingDown for ever nor
// leave anything stopped, but roll back, naming the webhook.
func TestAWebhookThatCannotTakeTheBypassRollsTheMoveBackInsteadOfStalling(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "fullconds")
	ctx := context.Background()
	g := NewWithT(t)
	name := "capi-validating-webhook-configuration"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: name}, cfg)).To(Succeed())
	before := cfg.DeepCopy()
	full := cfg.DeepCopy()
	for i := len(full.Webhooks[0].MatchConditions); i < 64; i++ {
		full.Webhooks[0].MatchConditions = append(full.Webhooks[0].MatchConditions,
			admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("someone-else-%d", i), Expression: "true"})
	}
	g.Expect(movetest.Env.Target.Client.Update(ctx, full)).To(Succeed())
	restore := func() {
		cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: name}, cur); err == nil {
			cur.Webhooks = before.Webhooks
			_ = movetest.Env.Target.Client.Update(ctx, cur)
		}
	}
	t.Cleanup(restore)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	second := &metav1.Duration{Duration: time.Second}
	mo := movetest.NewMoveOperation(t, rc.Ops, "full-conditions", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{BlockMove: second, ScaleDown: second},
	})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 3*time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonScaleDownTimeout))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("64 match conditions"))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(name))
	restore()
	rc.AssertAsBefore(ctx, g)
}

// kube-apiserver can go on calling, for the operator, a webhook whose
// stored configuration bypasses it: it keeps what it built of each
// configuration until an update reaches it, and an update racing with a
// rebuild can leave the older build in place, for as long as nothing
// writes the configuration again (seen in CI: Deleting refused for six
// minutes by a LoopMachine webhook that was down and bypassed). Past the
// point of no return that is a move waiting for ever with every provider
// at zero. The stale API server is played by the operator's interceptor:
// the source refuses the operator's writes to LoopMachines, in the API
// server's words, until the webhook's configuration is written again.
func TestAWebhookTheAPIServerStillCallsDespiteTheBypassIsReloadedAndTheMoveFinishes(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "stale")
	ctx := context.Background()
	g := NewWithT(t)
	const webhook = "validation.loopmachine.infrastructure.cluster.x-k8s.io"
	var reloaded atomic.Bool
	var refused atomic.Int32
	movetest.StartOperator(t, movetest.OperatorOptions{
		FailIf: func(cluster, verb string, obj client.Object) error {
			if cluster != "source" || (verb != "patch" && verb != "delete") || reloaded.Load() {
				return nil
			}
			if movetest.KindOf(obj) != "LoopMachine" {
				return nil
			}
			refused.Add(1)
			return apierrors.NewInternalError(fmt.Errorf(`failed calling webhook %q: failed to call webhook: Post "https://capl-webhook-service.capl-system.svc:443/validate-infrastructure-cluster-x-k8s-io-v1alpha1-loopmachine?timeout=10s": dial tcp 127.96.2.13:443: connect: connection refused`, webhook))
		},
		OnWrite: func(cluster, verb string, obj client.Object) {
			cfg, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			if !ok || cluster != "source" || verb != "update" {
				return
			}
			if _, marked := cfg.Annotations[movev1alpha1.BypassRefreshedAnnotation]; !marked {
				return
			}
			for _, w := range cfg.Webhooks {
				if w.Name == webhook {
					reloaded.Store(true)
				}
			}
		},
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "stale-webhook", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	g.Expect(refused.Load()).To(BeNumerically(">", 0), "the stale webhook refused the operator's deletion at least once")
	g.Expect(reloaded.Load()).To(BeTrue(), "the configuration holding the webhook was written again")
	g.Eventually(func(g Gomega) {
		notes := movetest.WarningNotes(ctx, g, mo, movev1alpha1.ReasonBypassReapplied)
		g.Expect(notes).NotTo(BeEmpty())
		g.Expect(notes[0]).To(ContainSubstring(webhook))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "a Warning event says which webhook was reloaded and why")
	// The refresh's mark goes with the bypass: the webhooks are as before.
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore))
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
}

// bypassRemoval plays somebody who writes the loop provider's validating
// webhook configuration back as its manifests have it (without the move's
// bypass) in one cluster, and records what follows: the operator's writes
// that the webhooks, down and no longer bypassed, refuse, and the
// operator's own writes of the configuration.
type bypassRemoval struct {
	m        *testenv.Management
	cluster  string // "source" or "target", as the operator's interceptor names it
	removed  atomic.Bool
	again    atomic.Bool
	refusals atomic.Int32
}

const loopWebhookConfiguration = "capl-validating-webhook-configuration"

// remove takes the bypass away, the first time only, and waits until the
// API server has taken the change in (about 25 ms).
func (b *bypassRemoval) remove(ctx context.Context) error {
	if b.removed.Swap(true) {
		return nil
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := b.m.Client.Get(ctx, client.ObjectKey{Name: loopWebhookConfiguration}, cfg); err != nil {
		return err
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].MatchConditions = nil
	}
	if err := b.m.Client.Update(ctx, cfg); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	return nil
}

func (b *bypassRemoval) onWriteError(cluster, _ string, _ client.Object, err error) {
	if cluster == b.cluster && strings.Contains(err.Error(), "failed calling webhook") {
		b.refusals.Add(1)
	}
}

func (b *bypassRemoval) onWrite(cluster, verb string, obj client.Object) {
	cfg, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	if ok && cluster == b.cluster && verb == "update" && cfg.Name == loopWebhookConfiguration && b.removed.Load() {
		b.again.Store(true)
	}
}

func (b *bypassRemoval) expectInstalledAgain(g Gomega) {
	g.Expect(b.removed.Load()).To(BeTrue(), "the bypass was removed from the %s", b.cluster)
	g.Expect(b.refusals.Load()).To(BeNumerically(">", 0), "the %s's LoopMachine webhook, down and no longer bypassed, refused the operator", b.cluster)
	g.Expect(b.again.Load()).To(BeTrue(), "the operator installed the bypass again in the %s", b.cluster)
}

// Somebody applies a provider's manifests again in the middle of a move (a
// GitOps tool healing drift, an installer): the webhook configurations lose
// the bypass, and the operator's next write meets a webhook whose server
// the move stopped. Past the point of no return that write is retried for
// ever; the operator must put the bypass back instead. Here the
// configuration is written back without the bypass just before the
// operator's first deletion of a LoopMachine, whose webhook then refuses
// it for real.
func TestABypassRemovedDuringTheMoveIsInstalledAgainAndTheMoveFinishes(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "unbypassed")
	ctx := context.Background()
	g := NewWithT(t)
	b := &bypassRemoval{m: movetest.Env.Source, cluster: "source"}
	movetest.StartOperator(t, movetest.OperatorOptions{
		FailIf: func(cluster, verb string, obj client.Object) error {
			if cluster == "source" && verb == "patch" && movetest.KindOf(obj) == "LoopMachine" {
				return b.remove(ctx)
			}
			return nil
		},
		OnWriteError: b.onWriteError,
		OnWrite:      b.onWrite,
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "unbypassed", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	b.expectInstalledAgain(g)
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore), "the webhooks are as before the move")
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
}

// The same during a rollback: the source is restored first, then the
// move's copies are deleted from the target while its controllers are
// still down. A bypass removed from the target's webhooks then would leave
// the rollback retrying for ever with the target's providers at zero (and
// whatever the target already managed unmanaged).
func TestABypassRemovedFromTheTargetDuringARollbackIsInstalledAgainAndTheRollbackFinishes(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "unbypassedrb")
	ctx := context.Background()
	g := NewWithT(t)
	b := &bypassRemoval{m: movetest.Env.Target, cluster: "target"}
	var loopMachineCopied, copyFailed atomic.Bool
	var removedIn atomic.Value
	movetest.StartOperator(t, movetest.OperatorOptions{
		FailIf: func(cluster, verb string, obj client.Object) error {
			if cluster != "target" {
				return nil
			}
			kind := movetest.KindOf(obj)
			switch {
			case verb == "create" && kind == "Secret" && loopMachineCopied.Load():
				// Copying fails once LoopMachines are in the target: the
				// move rolls back, and has copies there to delete.
				copyFailed.Store(true)
				return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, obj.GetName(), errors.New("fault injected by the test"))
			case verb == "patch" && kind == "LoopMachine" && copyFailed.Load() && !b.removed.Load():
				// The rollback's first deletion of a LoopMachine copy.
				now := &movev1alpha1.MoveOperation{}
				if err := movetest.Client.Get(ctx, client.ObjectKey{Namespace: rc.Ops, Name: "unbypassed-rollback"}, now); err == nil {
					removedIn.Store(now.Status.Phase)
				}
				return b.remove(ctx)
			}
			return nil
		},
		OnWriteError: b.onWriteError,
		OnWrite: func(cluster, verb string, obj client.Object) {
			b.onWrite(cluster, verb, obj)
			if cluster == "target" && verb == "create" && movetest.KindOf(obj) == "LoopMachine" {
				loopMachineCopied.Store(true)
			}
		},
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "unbypassed-rollback", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
	})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)

	b.expectInstalledAgain(g)
	g.Expect(removedIn.Load()).To(Equal(movev1alpha1.PhaseRollingBack), "it was removed during the rollback")
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore), "the webhooks are as before the move")
}

// A target Secret made unusable before the point of no return (its key
// renamed: a re-applied manifest, a rotation gone wrong) was waited for
// without end: in Copying every provider of both clusters at zero, the
// copy's timeout not applying to it; in Recording with the source's claim
// held and GitOps managers suspended, Recording having no timeout. Both
// now count it as any other error against their timeout (Recording's is
// spec.timeouts.scaleDown), and the move rolls back: the source comes back
// without the target, the target once the Secret is mended, and the status
// says what the rollback waits for meanwhile.
func TestATargetSecretBrokenBeforeThePointOfNoReturnRollsTheMoveBackInsteadOfWaitingForEver(t *testing.T) {
	for _, c := range []struct {
		phase    movev1alpha1.MovePhase
		timeouts movev1alpha1.TimeoutsSpec
		reason   string
		// breaksAt says whether the operator's write is where the Secret
		// breaks: one of the phase's first writes.
		breaksAt func(cluster, verb string, obj client.Object) bool
	}{{
		phase:    movev1alpha1.PhaseRecording,
		timeouts: movev1alpha1.TimeoutsSpec{ScaleDown: &metav1.Duration{Duration: time.Second}},
		reason:   movev1alpha1.ReasonRecordingTimeout,
		breaksAt: func(_, verb string, obj client.Object) bool {
			mo, ok := obj.(*movev1alpha1.MoveOperation)
			return ok && verb == "patch/status" && mo.Status.Phase == movev1alpha1.PhaseRecording
		},
	}, {
		phase:    movev1alpha1.PhaseCopying,
		timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Second}},
		reason:   movev1alpha1.ReasonCopyTimeout,
		breaksAt: func(cluster, verb string, _ client.Object) bool { return cluster == "target" && verb == "create" },
	}} {
		t.Run("in "+string(c.phase), func(t *testing.T) {
			rc := movetest.NewRollbackCase(t, "badsecret")
			ctx := context.Background()
			g := NewWithT(t)
			movetest.NewSecret(t, rc.Ops, "breaks", map[string][]byte{"value": movetest.TargetKubeconfig})
			key := client.ObjectKey{Namespace: rc.Ops, Name: "breaks"}
			setData := func(data map[string][]byte) error {
				return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
					s := &corev1.Secret{}
					if err := movetest.Env.Source.Client.Get(ctx, key, s); err != nil {
						return err
					}
					s.Data = data
					return movetest.Env.Source.Client.Update(ctx, s)
				})
			}

			var once sync.Once
			movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
				if c.breaksAt(cluster, verb, obj) {
					once.Do(func() {
						if err := setData(map[string][]byte{"kubeconfig": movetest.TargetKubeconfig}); err != nil {
							t.Errorf("breaking the target's Secret: %v", err)
						}
					})
				}
			}})
			mo := movetest.NewMoveOperation(t, rc.Ops, "secret-breaks", movev1alpha1.MoveOperationSpec{
				Target: movetest.TargetRef("breaks"), Namespaces: rc.Fleet.Namespaces, Timeouts: c.timeouts,
			})

			g.Eventually(func(g Gomega) {
				got := movetest.Get(g, mo)
				g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack))
				g.Expect(got.Status.FailureReason).To(Equal(c.reason))
				g.Expect(got.Status.FailureMessage).To(ContainSubstring(`has no key "value"`))
				stalled := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.StalledCondition)
				g.Expect(stalled).NotTo(BeNil())
				g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(stalled.Reason).To(Equal(movev1alpha1.ReasonTargetSecretKeyNotFound), "the rollback says it waits for the Secret")
				g.Expect(sourceReplicasNow(g)).To(Equal(movetest.SourceReplicas(rc.StateBefore)), "the source's controllers do not wait for the target")
			}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())

			g.Expect(setData(map[string][]byte{"value": movetest.TargetKubeconfig})).To(Succeed())
			rc.AssertRolledBack(mo, c.reason)
		})
	}
}

// A provider Deployment deleted during a move (an installer replacing it,
// an upgrade) made every restore fail on it for ever: RestoringSource never
// unpaused the source nor removed its bypass, and a rollback never ended.
// The restore goes on without it, and says so; whoever deleted it decides
// whether it comes back.
func TestAControllerDeletedDuringTheMoveIsLeftOutOfTheRestoreAndTheMoveFinishes(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "gone")
	ctx := context.Background()
	g := NewWithT(t)
	p := movetest.Env.Source.CAPI.Provider(capiprovider.KubeadmControlPlaneProvider)
	key := client.ObjectKey{Namespace: p.Namespace, Name: p.Deployment}
	saved := &appsv1.Deployment{}
	g.Expect(movetest.Env.Source.Client.Get(ctx, key, saved)).To(Succeed())
	t.Cleanup(func() {
		// Put it back as installed, before the fleet is purged (its
		// webhooks are needed for that) and for the tests that follow.
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: saved.Namespace, Name: saved.Name, Labels: saved.Labels}, Spec: saved.Spec}
		d.Spec.Replicas = ptr.To[int32](1)
		if err := movetest.Env.Source.Client.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("creating %s again: %v", key, err)
			return
		}
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := p.WaitServing(wait, true); err != nil {
			t.Errorf("%s serves no webhooks again: %v", key, err)
		}
	})

	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, _ client.Object) {
		if cluster == "target" && verb == "create" {
			once.Do(func() {
				if err := movetest.Env.Source.Client.Delete(ctx, saved.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
					t.Errorf("deleting %s: %v", key, err)
				}
			})
		}
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "controller-gone", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	want := movetest.ClusterState{Replicas: maps.Clone(rc.StateBefore.Replicas), Webhooks: rc.StateBefore.Webhooks}
	delete(want.Replicas, movetest.Env.Source.Name+" "+key.String())
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(want), "every other controller is back, and no webhook keeps the bypass")
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, rc.Fleet.Namespaces)
	g.Eventually(func(g Gomega) {
		notes := movetest.WarningNotes(ctx, g, mo, movev1alpha1.ReasonControllerGone)
		g.Expect(notes).NotTo(BeEmpty())
		g.Expect(notes[0]).To(ContainSubstring(key.String()))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "a Warning event names the controller that is not restored")
}

// Deletion protection (an admission policy that refuses to delete
// Clusters, as platforms install against accidents) refused the move's
// deletes only in Deleting, past the point of no return, where the move
// retries for ever with every provider stopped. The move asks the source
// with dry-run requests before that point, and rolls back on a refusal,
// saying what refused and why. The policy is a real
// ValidatingAdmissionPolicy, which the bypass does not cover.
func TestADeletionTheSourceRefusesIsFoundBeforeThePointOfNoReturnAndTheMoveRollsBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "protected")
	ctx := context.Background()
	g := NewWithT(t)
	wc := rc.Fleet.Clusters[0]
	name := "protect-clusters-" + wc.Namespace
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"clusters"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "Clusters are protected from deletion"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: wc.Namespace}},
			},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		g.Expect(movetest.Env.Source.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = movetest.Env.Source.Client.Delete(ctx, o) }) // before the fleet is purged
	}
	cluster := &metav1.PartialObjectMetadata{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	cluster.SetNamespace(wc.Namespace)
	cluster.SetName(wc.Name)
	g.Eventually(func() error {
		return movetest.Env.Source.Client.Delete(ctx, cluster, client.DryRunAll)
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("protected from deletion")), "the policy is in force")

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, rc.Ops, "protected", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonDeletionRefused)
	failed := movetest.Get(g, mo)
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("%s/%s", wc.Namespace, wc.Name)))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("Clusters are protected from deletion"))
	g.Expect(failed.Status.Progress.Deleted).To(BeZero())
}

// Once the target is restored, the source noted on what it keeps the
// copies the target holds (for a later move's sake) before unpausing what
// it keeps and removing its bypass, and waited for the target to do so for
// ever: a target gone for good right after its restore left the source's
// kept objects paused, its bypass in place and the claim held. Past
// spec.timeouts.scaleUp the source's restore finishes without the notes,
// and says so.
func TestTheSourceFinishesItsRestoreWithoutATargetThatGoesAwayOnceRestored(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "tgtgone")
	ctx := context.Background()
	g := NewWithT(t)
	proxy := movetest.TargetViaProxy(t, rc.Ops)

	var once sync.Once
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(_, verb string, obj client.Object) {
		if mo, ok := obj.(*movev1alpha1.MoveOperation); ok && verb == "patch/status" && mo.Status.Phase == movev1alpha1.PhaseRestoringSource {
			once.Do(proxy.Cut) // the target goes away once restored
		}
	}})
	mo := movetest.NewMoveOperation(t, rc.Ops, "target-gone", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("via-proxy"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{ScaleUp: &metav1.Duration{Duration: time.Second}},
	})
	movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 2*time.Minute)
	g.Eventually(func(g Gomega) {
		notes := movetest.WarningNotes(ctx, g, mo, movev1alpha1.ReasonCopiesNotNoted)
		g.Expect(notes).NotTo(BeEmpty(), "a Warning event says the copies were not noted, and why")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	proxy.Restore()
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore), "both clusters' controllers are back and no webhook keeps the bypass")
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
}

// An operator killed at the same point of Copying every time (out of
// memory at one group, say) reported no error for the copy timeout to act
// on, and each restarted operator copied every group again, each a
// success: the move stayed in Copying for ever, every provider stopped.
// Once operators started Copying more than three times without copying a
// group further, and nothing further was copied for spec.timeouts.copy,
// the move rolls back. One restart alone does not (see the crash sweeps,
// which restart the operator in every section of Copying under the default
// timeout and end Done).
func TestAnOperatorKilledAtTheSameGroupEveryTimeRollsTheMoveBack(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "killed")
	g := NewWithT(t)
	var (
		mu     sync.Mutex
		groups []int32 // status.progress.copiedGroups as each status write left it
	)
	killed := movetest.OperatorOptions{
		CrashIf: func(w movetest.PendingWrite) bool {
			return w.Cluster == "target" && w.Verb == "create" && movetest.KindOf(w.Obj) == "MachineDeployment"
		},
		OnWrite: func(_, verb string, obj client.Object) {
			if mo, ok := obj.(*movev1alpha1.MoveOperation); ok && verb == "patch/status" && mo.Status.Phase == movev1alpha1.PhaseCopying && mo.Status.Progress != nil {
				mu.Lock()
				defer mu.Unlock()
				groups = append(groups, mo.Status.Progress.CopiedGroups)
			}
		},
	}
	resumer := movetest.StartResumer(t, movetest.StartOperator(t, killed), killed)
	mo := movetest.NewMoveOperation(t, rc.Ops, "killed", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: 2 * time.Second}},
	})
	rc.AssertRolledBack(mo, movev1alpha1.ReasonCopyInterrupted)

	failed := movetest.Get(g, mo)
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("keeps stopping while it copies"))
	g.Expect(failed.Status.Progress.CopyStarts).To(BeNumerically(">", 3))
	// Remove the MoveOperation while an operator still runs to release it:
	// without one, its cleanup waits two minutes before taking its
	// finalizer off by hand.
	movetest.DeleteMoveOperation(t, mo)
	resumer.Stop()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(groups); i++ {
		g.Expect(groups[i]).To(BeNumerically(">=", groups[i-1]), "the groups copied, as the status counts them, never go back after a restart: %v", groups)
	}
	g.Expect(slices.Max(groups)).To(BeNumerically(">", 0), "groups before the MachineDeployments' were copied")
}
