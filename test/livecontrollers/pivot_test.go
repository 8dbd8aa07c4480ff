//go:build cluster

package livecontrollers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// TestABootstrapClusterPivotsIntoTheClusterItCreatedAndBack makes the move
// most users make. The source is a bootstrap cluster whose fleet holds the
// Cluster that stands for the target management cluster itself (its
// control-plane endpoint, kubeconfig and Nodes are the target's: see
// testenv.Options.SelfHosted) and two others, classic and
// ClusterClass-based. The operator installed in the bootstrap cluster moves
// the fleet into the self-hosted cluster, crashing once in Copying and once
// in Deleting; then the operator installed in the self-hosted cluster moves
// everything back. Both carry the status, as the README's pivot does: with
// Rebuild, Cluster API's bootstrap controller generates a MachinePool's
// bootstrap data again (the takeover test shows it), and the target could
// not equal the source. After each move the fleet is what it was, reconciled by
// its new management cluster with every controller live, and not one
// Machine, Node or VM of the self-hosted cluster (or of the others) was
// made, removed or replaced: a controller replacing the self-hosted
// cluster's Machines after a pivot would delete the management cluster
// from under itself.
func TestABootstrapClusterPivotsIntoTheClusterItCreatedAndBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	prefix := "pv" + rand.String(4)
	selfHosted, err := fleet.Create(ctx, env.Source.Client, fleet.Options{
		Clusters:   1,
		Namespaces: []string{prefix + "-mgmt"},
		Name:       prefix + "-mgmt",
		Live:       &fleet.Live{Cloud: env.Cloud, Workload: env.SelfHosted, ManagementCluster: env.Source.Name},
	})
	g.Expect(err).NotTo(HaveOccurred())
	others, err := fleet.Create(ctx, env.Source.Client, fleet.Options{
		Clusters:   2,
		Namespaces: []string{prefix + "-a"},
		Name:       prefix,
		Live:       &fleet.Live{Cloud: env.Cloud, Workload: env.Workload, ManagementCluster: env.Source.Name},
	})
	g.Expect(err).NotTo(HaveOccurred())
	p := &pivot{self: selfHosted, all: fleet.Join(selfHosted, others)}
	t.Cleanup(func() { deleteNamespaces(t, p.all.Namespaces) })
	g.Expect(p.all.Clusters).To(ContainElements(
		HaveField("Shape", fleet.Classic), HaveField("Shape", fleet.ClusterClass)), "the others are classic and ClusterClass-based")

	g.Eventually(func() error {
		if err := clustersAvailable(ctx, env.Source, p.all); err != nil {
			return err
		}
		return takeover.Quiet(env.Source, p.ours, quietBeforeMove)
	}, takeoverSettleBound, 2*time.Second).Should(Succeed(), "the fresh fleet settles in the bootstrap cluster")
	nodes := p.selfHostedNodes(ctx, g)
	g.Expect(nodes).NotTo(BeEmpty(), "the self-hosted cluster's Machines have their Nodes in the target management cluster")

	t.Run("pivot", func(t *testing.T) {
		op := startOperatorIn(t, env.Source, env.Target)
		p.move(t, op, env.Source, env.Target, movev1alpha1.PhaseCopying, movev1alpha1.PhaseDeleting)
	})
	if t.Failed() {
		return
	}
	g.Expect(p.selfHostedNodes(ctx, g)).To(Equal(nodes), "no Node of the self-hosted cluster was made or removed by the pivot")
	t.Run("back", func(t *testing.T) {
		op := startOperatorIn(t, env.Target, env.Source)
		p.move(t, op, env.Target, env.Source)
	})
	g.Expect(p.selfHostedNodes(ctx, g)).To(Equal(nodes), "no Node of the self-hosted cluster was made or removed by the move back")
}

// pivot is the fleet a pivot moves: the self-hosted cluster's and the
// others'.
type pivot struct {
	self, all *fleet.Fleet
}

// ours tells whether an object is the moved fleet's.
func (p *pivot) ours(namespace, name string) bool { return takeover.InFleet(p.all)(namespace, name) }

// move moves the whole fleet from source to target with op, carrying the
// status, crashing the operator once in each of crashIn, and checks what a
// move must leave.
func (p *pivot) move(t *testing.T, op *mover.Operator, source, target *testenv.Management, crashIn ...movev1alpha1.MovePhase) {
	g := NewWithT(t)
	ctx := context.Background()
	before := p.snapshot(ctx, g, source)
	machinesBefore := takeFleetState(ctx, g, source, p.all)
	replicas := providerReplicas(ctx, g, source, target)
	cloudBefore := env.Cloud.LastSeq()
	sourceWrites, targetWrites := len(source.CAPI.Writes()), len(target.CAPI.Writes())

	moveCtx, cancel := context.WithTimeout(ctx, moveBound)
	defer cancel()
	name := "pivot-" + strings.ToLower(source.Name) + "-" + rand.String(4)
	tl, mo, err := op.MoveCrashingIn(moveCtx, nil, name, existing(ctx, g, source, p.all.Namespaces), crashIn, mover.CarryStatus)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = op.Delete(context.Background(), mo) })
	g.Expect(mo.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
	t.Logf("moved from %s to %s in %s, crashed in %v: %s", source.Name, target.Name, tl.Ended.Sub(tl.Began).Round(time.Millisecond), crashIn, tl)

	quietFrom, quietTo := tl.Reached(string(movev1alpha1.PhaseCopying)), tl.Reached(string(movev1alpha1.PhaseRestoringTarget))
	g.Expect(quietTo).To(BeTemporally(">", quietFrom))
	for _, m := range []*testenv.Management{source, target} {
		expectStoppedBetween(t, m, quietFrom, quietTo)
	}
	g.Expect(providersBack(ctx, source, target, replicas)).To(Succeed(), "every provider runs again at its recorded replicas")
	g.Eventually(func() error { return reconciledBy(ctx, target, p.all) }, reconcileBound, 2*time.Second).
		Should(Succeed(), "the new management cluster's controllers reconcile the whole fleet")
	atReconcile := takeFleetState(ctx, g, target, p.all)
	g.Consistently(func() error { return clustersAvailable(ctx, target, p.all) }, takeoverWindow, 5*time.Second).
		Should(Succeed(), "the moved fleet stays Available")

	if diff := snapshot.Diff(before, p.snapshot(ctx, g, target)); diff != "" {
		t.Errorf("%s does not hold what %s held before the move (-before +after):\n%s", target.Name, source.Name, diff)
	}
	after := takeFleetState(ctx, g, target, p.all)
	g.Expect(after.names()).To(Equal(machinesBefore.names()), "the Machines, infra machines, KubeadmConfigs and bootstrap Secrets are the same")
	g.Expect(after.uids).To(Equal(atReconcile.uids), "none was deleted and made again")
	g.Expect(after.templates).To(Equal(machinesBefore.templates), "no rollout: the template references are the same")
	p.expectNoChurn(t, target, targetWrites, cloudBefore)
	for _, w := range takeover.Writes(source, sourceWrites, p.ours) {
		if w.Time.After(quietFrom) {
			t.Errorf("%s: its controllers, back up, touched what moved: %s", source.Name, w)
		}
	}
	t.Logf("TAKEOVER: %s reconciles the fleet of %d clusters (%d Machines), the self-hosted cluster among them; no VM, Machine or Node made or removed",
		target.Name, len(p.all.Clusters), len(after.uids[machineKey]))
}

// existing are the namespaces that exist in m: a move creates in its
// target the namespaces of what it moves, not a fleet's empty ones.
func existing(ctx context.Context, g Gomega, m *testenv.Management, namespaces []string) []string {
	var out []string
	for _, ns := range namespaces {
		err := m.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, ns)
	}
	return out
}

// expectNoChurn checks that, in the new management cluster, no controller
// made or removed a machine's objects, and that no VM was made, removed or
// powered off since the move began.
func (p *pivot) expectNoChurn(t *testing.T, target *testenv.Management, targetWrites int, cloudBefore int64) {
	t.Helper()
	for _, w := range takeover.Writes(target, targetWrites, p.ours) {
		if churns(w) && w.Succeeded() {
			t.Errorf("%s: a controller created or deleted a machine's object: %s", target.Name, w)
		}
		if w.Kind == "Secret" && w.Verb == "update" {
			t.Errorf("%s: the bootstrap controller rewrote a bootstrap Secret although the move carried the status: %s", target.Name, w)
		}
	}
	for _, e := range env.Cloud.EventsSince(cloudBefore) {
		if e.Type != cloud.PowerOn && (p.ours(e.Caller.Namespace, "") || p.ours(vmNamespace(e.VMName), "")) {
			t.Errorf("a VM was disturbed since the move began: %v", e)
		}
	}
}

// snapshot captures the fleet's objects in m, cluster-scoped ones
// included, without what the controllers compute (status) or what the
// move writes and takes away again (its pause).
func (p *pivot) snapshot(ctx context.Context, g Gomega, m *testenv.Management) *snapshot.Snapshot {
	s, err := snapshot.Take(ctx, m.Client, snapshot.Options{
		Namespaces:        p.all.Namespaces,
		IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation},
	})
	g.Expect(err).NotTo(HaveOccurred())
	out := &snapshot.Snapshot{}
	for _, o := range s.Objects {
		if p.ours(o.Namespace, o.Name) {
			out.Objects = append(out.Objects, o)
		}
	}
	g.Expect(out.Objects).NotTo(BeEmpty(), "%s holds the fleet", m.Name)
	return out
}

// selfHostedNodes are the Nodes of the self-hosted cluster's Machines in
// the target management cluster, by name, with their UIDs.
func (p *pivot) selfHostedNodes(ctx context.Context, g Gomega) map[string]types.UID {
	list := &corev1.NodeList{}
	g.Expect(env.SelfHosted.Client.List(ctx, list)).To(Succeed())
	out := map[string]types.UID{}
	for _, n := range list.Items {
		ns, _, _ := strings.Cut(strings.TrimPrefix(n.Spec.ProviderID, loopprovider.ProviderIDPrefix), "/")
		if slices.Contains(p.self.Namespaces, ns) {
			out[n.Name] = n.UID
		}
	}
	return out
}

// providerReplicas records the replicas of every provider's Deployment in
// both clusters, by cluster and provider.
func providerReplicas(ctx context.Context, g Gomega, clusters ...*testenv.Management) map[string]int32 {
	out := map[string]int32{}
	for _, m := range clusters {
		for _, pr := range m.CAPI.Providers {
			d := &appsv1.Deployment{}
			g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: pr.Deployment}, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).NotTo(BeNil())
			g.Expect(*d.Spec.Replicas).To(BeNumerically(">", 0), "%s: provider %s runs before the move", m.Name, pr.Name)
			out[m.Name+"/"+pr.Name] = *d.Spec.Replicas
		}
	}
	return out
}

// providersBack returns the first provider, in either cluster, whose
// Deployment is not back at its recorded replicas, Ready, with its
// controllers running.
func providersBack(ctx context.Context, source, target *testenv.Management, replicas map[string]int32) error {
	for _, m := range []*testenv.Management{source, target} {
		for _, pr := range m.CAPI.Providers {
			if err := providerBack(ctx, m, pr, replicas[m.Name+"/"+pr.Name]); err != nil {
				return err
			}
		}
	}
	return nil
}

func providerBack(ctx context.Context, m *testenv.Management, pr *capiprovider.Provider, want int32) error {
	d := &appsv1.Deployment{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: pr.Deployment}, d); err != nil {
		return err
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
		return fmt.Errorf("%s: provider %s has replicas %v, recorded %d", m.Name, pr.Name, d.Spec.Replicas, want)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pr.WaitControllers(ctx, true); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	return nil
}
