//go:build cluster

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/snapshot"
)

// rollbackCase prepares a small fleet, records both clusters, and checks
// after a failed move that both are as they were.
type rollbackCase struct {
	t           *testing.T
	f           *fleet.Fleet
	ops         string
	stateBefore clusterState
	before      *snapshot.Snapshot
}

func newRollbackCase(t *testing.T, prefix string) *rollbackCase {
	ensureSetup(t)
	ctx := context.Background()
	g := NewWithT(t)
	name := prefix + rand.String(4)
	f := createFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})
	return &rollbackCase{
		t: t, f: f, ops: opsNamespace(t),
		stateBefore: stateOf(ctx, g),
		before:      inNamespaces(take(ctx, g, env.Source, f.Namespaces), f.Namespaces...),
	}
}

// assertRolledBack checks the failure is reported with its reason and both
// clusters are back as they were; extra lists objects of the source the
// comparison leaves out (created or deleted during the move by somebody
// else).
func (rc *rollbackCase) assertRolledBack(mo *movev1alpha1.MoveOperation, reason string, extra ...snapshot.Key) {
	t := rc.t
	g := NewWithT(t)
	ctx := context.Background()
	failed, _ := waitForPhase(t, mo, movev1alpha1.PhaseFailed, 3*time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(reason))
	g.Expect(failed.Status.FailureMessage).NotTo(BeEmpty())
	g.Expect(kstatusOf(g, failed)).To(Equal(status.FailedStatus))
	stalled := meta.FindStatusCondition(failed.Status.Conditions, movev1alpha1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Reason).To(Equal(reason))

	after := inNamespaces(take(ctx, g, env.Source, rc.f.Namespaces), rc.f.Namespaces...)
	if diff := snapshot.Diff(without(rc.before, extra), without(after, extra)); diff != "" {
		t.Fatalf("the source is not as it was before the move:\n%s", diff)
	}
	for _, o := range inNamespaces(take(ctx, g, env.Target, rc.f.Namespaces), rc.f.Namespaces...).Objects {
		if o.Kind != "Secret" {
			t.Errorf("%s is left in the target after the rollback", o.Key())
		}
	}
	g.Expect(stateOf(ctx, g)).To(Equal(rc.stateBefore), "controllers and webhooks must be as before")
	assertNoMoveMarks(ctx, g, env.Source.Client, rc.f.Namespaces)
	assertNoMoveMarks(ctx, g, env.Target.Client, rc.f.Namespaces)
}

// assertAsBefore checks that a move that did not happen left both clusters
// as they were: the source's objects, nothing in the target, controllers and
// webhooks, no pauses.
func (rc *rollbackCase) assertAsBefore(ctx context.Context, g Gomega) {
	after := inNamespaces(take(ctx, g, env.Source, rc.f.Namespaces), rc.f.Namespaces...)
	if diff := snapshot.Diff(rc.before, after); diff != "" {
		rc.t.Fatalf("the source is not as it was before the move:\n%s", diff)
	}
	g.Expect(inNamespaces(take(ctx, g, env.Target, rc.f.Namespaces), rc.f.Namespaces...).Objects).To(BeEmpty())
	g.Expect(stateOf(ctx, g)).To(Equal(rc.stateBefore), "controllers and webhooks must be as before")
	assertNoMoveMarks(ctx, g, env.Source.Client, rc.f.Namespaces)
}

// without returns the objects of s but those of keys.
func without(s *snapshot.Snapshot, keys []snapshot.Key) *snapshot.Snapshot {
	out := &snapshot.Snapshot{}
	for _, o := range s.Objects {
		if !contains(keyStrings(keys), o.Key().String()) {
			out.Objects = append(out.Objects, o)
		}
	}
	return out
}

func keyStrings(keys []snapshot.Key) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.String())
	}
	return out
}

func TestATargetWithoutACRDFailsTheMoveBeforeAnythingIsWritten(t *testing.T) {
	rc := newRollbackCase(t, "nocrd")
	g := NewWithT(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	name := "machinehealthchecks.cluster.x-k8s.io"
	g.Expect(env.Target.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
	g.Expect(env.Target.Client.Delete(ctx, crd)).To(Succeed())
	t.Cleanup(func() {
		restored := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name, Labels: crd.Labels, Annotations: crd.Annotations}, Spec: crd.Spec}
		g := NewWithT(t)
		g.Eventually(func() error { return env.Target.Client.Create(ctx, restored) }, time.Minute, 200*time.Millisecond).Should(Succeed())
		g.Eventually(func() error {
			return env.Target.Client.List(ctx, &clusterv1.MachineHealthCheckList{})
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	})
	g.Eventually(func() bool {
		return env.Target.Client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}) != nil
	}, time.Minute, 100*time.Millisecond).Should(BeTrue())

	startOperator(t, operatorOptions{})
	mo := newMoveOperation(t, rc.ops, "no-crd", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces})
	rc.assertRolledBack(mo, movev1alpha1.ReasonCRDMismatch)
	g.Expect(get(g, mo).Status.FailureMessage).To(ContainSubstring("machinehealthchecks"))
}

func TestAConflictingObjectInTheTargetRollsTheMoveBack(t *testing.T) {
	rc := newRollbackCase(t, "conflict")
	ctx := context.Background()
	ns, clusterName := rc.f.Clusters[0].Namespace, rc.f.Clusters[0].Name
	var once sync.Once
	startOperator(t, operatorOptions{onWrite: func(cluster, verb string, obj client.Object) {
		// Once the move has validated and started stopping controllers,
		// somebody creates an object of the fleet in the target.
		if _, ok := obj.(*appsv1.Deployment); !ok || cluster != "target" {
			return
		}
		once.Do(func() {
			_ = env.Target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			_ = env.Target.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName + "-kubeconfig"},
				StringData: map[string]string{"value": "not the moved one"}})
		})
	}})
	t.Cleanup(func() {
		_ = env.Target.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName + "-kubeconfig"}})
	})
	mo := newMoveOperation(t, rc.ops, "conflict", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces})
	rc.assertRolledBack(mo, movev1alpha1.ReasonTargetConflict)
	g := NewWithT(t)
	g.Expect(get(g, mo).Status.FailureMessage).To(ContainSubstring(clusterName + "-kubeconfig"))
	left := &corev1.Secret{}
	g.Expect(env.Target.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-kubeconfig"}, left)).To(Succeed())
	g.Expect(string(left.Data["value"])).To(Equal("not the moved one"), "the rollback must never delete what the move did not create")
}

// While the move copies, nobody but the operator gets past the stopped
// providers' webhooks: a Machine created then by another identity (a
// provider that ignores pause) is refused. An object of a kind no stopped
// webhook guards (here a Secret owned by the moved Cluster) is created, and
// one the move copied (the Cluster's kubeconfig Secret) is deleted: both are
// found before the point of no return, where the move reads the source again
// after its last group, and the move rolls back.
func TestAnObjectCreatedOrDeletedWhileCopyingRollsTheMoveBack(t *testing.T) {
	rc := newRollbackCase(t, "rogue")
	ctx := context.Background()
	g := NewWithT(t)
	wc := rc.f.Clusters[0]
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Source.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, cluster)).To(Succeed())
	rogue := snapshot.Key{Kind: "Secret", Namespace: wc.Namespace, Name: wc.Name + "-rogue"}
	victim := snapshot.Key{Kind: "Secret", Namespace: wc.Namespace, Name: wc.Name + "-kubeconfig"}
	machines := &clusterv1.MachineList{}
	g.Expect(env.Source.Client.List(ctx, machines, client.InNamespace(wc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: wc.Name})).To(Succeed())
	g.Expect(machines.Items).NotTo(BeEmpty())
	rogueMachine := machines.Items[0].DeepCopy()
	rogueMachine.ObjectMeta = metav1.ObjectMeta{Namespace: wc.Namespace, Name: rogueMachine.Name + "-rogue", Labels: rogueMachine.Labels, OwnerReferences: rogueMachine.OwnerReferences}
	rogueMachine.Status = clusterv1.MachineStatus{}
	var machineErr atomic.Value // the error creating the rogue Machine, as a string

	var once, deleteOnce sync.Once
	startOperator(t, operatorOptions{onWrite: func(cluster_, verb string, obj client.Object) {
		if cluster_ != "target" || verb != "create" {
			return
		}
		if obj.GetNamespace() == victim.Namespace && obj.GetName() == victim.Name {
			// The move read it from the source to copy it; somebody
			// deletes it there.
			deleteOnce.Do(func() {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim.Namespace, Name: victim.Name}}
				if err := env.Source.Client.Delete(ctx, s); err != nil {
					t.Errorf("deleting the victim Secret: %v", err)
				}
			})
		}
		// The move has recorded its plan and copies: somebody adds a
		// Secret to the Cluster's hierarchy in the source.
		once.Do(func() {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rogue.Namespace, Name: rogue.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID}}}}
			if err := env.Source.Client.Create(ctx, s); err != nil {
				t.Errorf("creating the rogue Secret: %v", err)
			}
			machineErr.Store(fmt.Sprint(env.Source.Client.Create(ctx, rogueMachine)))
		})
	}})
	mo := newMoveOperation(t, rc.ops, "rogue", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces})
	rc.assertRolledBack(mo, movev1alpha1.ReasonObjectsChanged, rogue, victim)
	g.Expect(get(g, mo).Status.FailureMessage).To(
		MatchRegexp(`Secret %s/%s appeared and .*Secret %s/%s vanished`, rogue.Namespace, rogue.Name, victim.Namespace, victim.Name))
	g.Expect(machineErr.Load()).To(ContainSubstring("webhook"), "the stopped provider's webhook refuses everyone but the operator")
}

// An object deleted from the source after the plan was recorded and before
// the move copies it does not come back: the move rolls back as soon as the
// copy reads it, rather than retrying it until spec.timeouts.copy (here an
// hour) with every provider stopped.
func TestAnObjectDeletedBeforeItsCopyRollsTheMoveBackAtOnce(t *testing.T) {
	rc := newRollbackCase(t, "vanish")
	ctx := context.Background()
	wc := rc.f.Clusters[0]
	victim := snapshot.Key{Kind: "Secret", Namespace: wc.Namespace, Name: wc.Name + "-kubeconfig"}
	var once sync.Once
	startOperator(t, operatorOptions{onWrite: func(cluster_, verb string, _ client.Object) {
		if cluster_ != "target" || verb != "create" {
			return
		}
		// The move has recorded its plan and begun to copy: somebody
		// deletes an object of a later group from the source.
		once.Do(func() {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim.Namespace, Name: victim.Name}}
			if err := env.Source.Client.Delete(ctx, s); err != nil {
				t.Errorf("deleting the victim Secret: %v", err)
			}
		})
	}})
	mo := newMoveOperation(t, rc.ops, "vanish", movev1alpha1.MoveOperationSpec{Target: targetRef("target"), Namespaces: rc.f.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Hour}}})
	rc.assertRolledBack(mo, movev1alpha1.ReasonObjectsChanged, victim)
	g := NewWithT(t)
	g.Expect(get(g, mo).Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("Secret %s/%s vanished from the source while the move copied", victim.Namespace, victim.Name)))
}

func TestAnUnreachableTargetDuringCopyingRollsTheMoveBackOnceItIsBack(t *testing.T) {
	rc := newRollbackCase(t, "unreach")
	g := NewWithT(t)

	proxy := startProxy(t, env.Target.Config.Host)
	kubeconfig := strings.Replace(string(targetKubeconfig), proxy.upstream, proxy.addr, 1)
	g.Expect(kubeconfig).NotTo(Equal(string(targetKubeconfig)), "the kubeconfig must point at the proxy")
	newSecret(t, rc.ops, "via-proxy", map[string][]byte{"value": []byte(kubeconfig)})

	startOperator(t, operatorOptions{onWrite: func(cluster, verb string, obj client.Object) {
		if cluster == "target" && verb == "create" {
			proxy.cut() // the target goes away as copying begins
		}
	}})
	mo := newMoveOperation(t, rc.ops, "unreachable", movev1alpha1.MoveOperationSpec{
		Target: targetRef("via-proxy"), Namespaces: rc.f.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: 3 * time.Second}},
	})

	// While the target is away, the status says what the operator waits for.
	g.Eventually(func(g Gomega) {
		got := get(g, mo)
		g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.FailureReason).To(Equal(movev1alpha1.ReasonCopyTimeout))
		ready := meta.FindStatusCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Message).To(ContainSubstring("target"))
		g.Expect(ready.Message).To(ContainSubstring("retrying"))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack), "the rollback cannot finish without the target")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	// The source does not wait for the target: its controllers are back and
	// its objects unpaused while the target is still away.
	g.Eventually(func(g Gomega) {
		g.Expect(stateIn(context.Background(), g, env.Source).Replicas).To(Equal(sourceReplicas(rc.stateBefore)))
		assertNoMoveMarks(context.Background(), g, env.Source.Client, rc.f.Namespaces)
	}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the source must be restored while the target is away")
	g.Expect(proxy.cuts.Load()).To(BeNumerically(">=", 1), "the target is still cut")

	proxy.restore()
	rc.assertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	g.Expect(proxy.cuts.Load()).To(BeNumerically(">=", 1))
}

// targetViaProxy puts a proxy between the operator and the target, and in ns
// a Secret "via-proxy" whose kubeconfig goes through it: proxy.cut takes the
// target away.
func targetViaProxy(t *testing.T, ns string) *tcpProxy {
	proxy := startProxy(t, env.Target.Config.Host)
	kubeconfig := strings.Replace(string(targetKubeconfig), proxy.upstream, proxy.addr, 1)
	newSecret(t, ns, "via-proxy", map[string][]byte{"value": []byte(kubeconfig)})
	return proxy
}

// tcpProxy forwards a local port to the target API server, and can be cut
// (connections refused, open ones closed) and restored, as a network that
// fails would.
type tcpProxy struct {
	addr     string
	upstream string
	mu       sync.Mutex
	ln       net.Listener
	conns    []net.Conn
	cuts     atomic.Int64
}

func startProxy(t *testing.T, upstreamURL string) *tcpProxy {
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{upstream: u.Host}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.cuts.Add(1)
	_ = p.ln.Close()
	p.ln = nil
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		panic(err)
	}
	p.serve(ln)
}

// sourceReplicas keeps the source cluster's replica counts of a state.
func sourceReplicas(st clusterState) map[string]int32 {
	out := map[string]int32{}
	for k, v := range st.Replicas {
		if strings.HasPrefix(k, env.Source.Name+" ") {
			out[k] = v
		}
	}
	return out
}

// A move whose plan cannot be recorded (the MoveOperation's namespace
// refuses the ConfigMaps: a quota, a policy) copies nothing, and does not
// retry for ever with every provider stopped: once Copying has made no
// progress for spec.timeouts.copy, it rolls back.
func TestAPlanThatCannotBeRecordedRollsTheMoveBack(t *testing.T) {
	rc := newRollbackCase(t, "norecord")
	startOperator(t, operatorOptions{failIf: func(cluster, verb string, obj client.Object) error {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cluster == "source" && verb == "create" && cm.Labels[movev1alpha1.PlanOfLabel] != "" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("exceeded quota: fault injected by the test"))
		}
		return nil
	}})
	mo := newMoveOperation(t, rc.ops, "move", movev1alpha1.MoveOperationSpec{
		Target: targetRef("target"), Namespaces: rc.f.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Second}},
	})
	rc.assertRolledBack(mo, movev1alpha1.ReasonCopyTimeout)
	g := NewWithT(t)
	g.Expect(get(g, mo).Status.FailureMessage).To(ContainSubstring("exceeded quota"))
}
