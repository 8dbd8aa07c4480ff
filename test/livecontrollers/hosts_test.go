//go:build cluster

package livecontrollers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/hostprovider"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// Bounds of the hosts test.
const (
	// hostsProvisionedBound is how long the host controller of a cluster
	// may take, once it runs, to have looked at every host (and
	// provisioned those it must).
	hostsProvisionedBound = 2 * time.Minute
	// hostsQuietWindow is how long the moved hosts are watched for a late
	// provision once the target's controller has looked at each.
	hostsQuietWindow = 10 * time.Second
)

// TestAHostMovedWithoutItsStatusIsProvisionedAgainAndOneMovedWithItIsNot
// moves BareMetalHosts, each provisioned for a worker's LoopMachine, once
// with spec.objectStatusPolicy Rebuild and once with Carry. A host keeps in its status
// alone what its disk holds and for whom, as Metal3's does: the target's
// host controller provisions every host that arrives without it again,
// wiping the node (metal3-io/baremetal-operator#431), and none that
// arrives with it, its consumer's UID rewritten to the copy's.
func TestAHostMovedWithoutItsStatusIsProvisionedAgainAndOneMovedWithItIsNot(t *testing.T) {
	op := startOperator(t)
	rebuild := createHostFleet(t, "hr"+rand.String(4))
	carry := createHostFleet(t, "hc"+rand.String(4))
	for _, f := range []*fleet.Fleet{rebuild, carry} {
		waitHostsProvisionedInSource(t, f)
	}

	t.Run("moved with Rebuild, as clusterctl moves, every host is provisioned again in the target", func(t *testing.T) {
		g := NewWithT(t)
		provisions := moveHosts(t, op, rebuild, "hosts-rebuild")
		hosts := hostNames(rebuild)
		for _, e := range provisions {
			t.Logf("provisioned again: %s", describeProvision(e))
		}
		g.Expect(provisionedHosts(provisions)).To(ConsistOf(hosts), "the target's host controller provisions every host once, as a host that has lost its status")
		for _, e := range provisions {
			g.Expect(e.Caller.ManagementCluster).To(Equal(env.Target.Name), "only the target's host controller provisions: %s", describeProvision(e))
		}
		t.Logf("REBUILD: %d of %d hosts provisioned again in the target", len(provisions), len(hosts))
	})

	t.Run("moved with Carry, no host is provisioned again and each keeps its consumer in the target", func(t *testing.T) {
		g := NewWithT(t)
		provisions := moveHosts(t, op, carry, "hosts-carry", mover.CarryStatus)
		for _, e := range provisions {
			t.Errorf("provisioned again: %s", describeProvision(e))
		}
		t.Logf("CARRY: %d of %d hosts provisioned again in the target", len(provisions), len(hostNames(carry)))
		g.Expect(provisions).To(BeEmpty(), "a host moved with its status is not provisioned again")
	})
}

// createHostFleet creates in the source one classic cluster with two
// workers, each with a BareMetalHost consumed by its LoopMachine.
func createHostFleet(t *testing.T, prefix string) *fleet.Fleet {
	t.Helper()
	f, err := fleet.Create(context.Background(), env.Source.Client, fleet.Options{
		Clusters:   1,
		Workers:    ptr.To(2),
		Namespaces: []string{prefix},
		Name:       prefix,
		Live:       &fleet.Live{Cloud: env.Cloud, Workload: env.Workload, ManagementCluster: env.Source.Name},
		Hosts:      true,
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { deleteNamespaces(t, f.Namespaces) })
	return f
}

// waitHostsProvisionedInSource waits until the fleet is Available and its
// hosts provisioned in the source, each once, and the controllers have left
// it alone for a while.
func waitHostsProvisionedInSource(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	keep := takeover.InFleet(f)
	g.Eventually(func() error {
		if err := clustersAvailable(ctx, env.Source, f); err != nil {
			return err
		}
		if err := hostsProvisionedFor(ctx, env.Source, f); err != nil {
			return err
		}
		return takeover.Quiet(env.Source, keep, quietBeforeMove)
	}, takeoverSettleBound, 2*time.Second).Should(Succeed(), "the fleet settles in the source, its hosts provisioned")
	provisions := provisionsOf(f, 0)
	g.Expect(provisionedHosts(provisions)).To(ConsistOf(hostNames(f)), "the source's host controller provisions each host once")
}

// moveHosts moves the fleet's namespaces with the operator and returns the
// Provision events of the fleet's hosts from the start of the move until
// the target's host controller has looked at every host and a quiet window
// has passed.
func moveHosts(t *testing.T, op *mover.Operator, f *fleet.Fleet, name string, options ...mover.SpecOption) []cloud.Event {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	from := env.Cloud.LastSeq()
	moveCtx, cancel := context.WithTimeout(ctx, moveBound)
	defer cancel()
	tl, mo, err := op.Move(moveCtx, nil, name+"-"+f.Namespaces[0], f.Namespaces, options...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = op.Delete(context.Background(), mo) })
	g.Expect(mo.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
	t.Logf("moved with spec.objectStatusPolicy %s in %s: %s", mo.Spec.ObjectStatusPolicyOrDefault(), tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)

	activity := env.Target.CAPI.HostActivity()
	g.Expect(activity).NotTo(BeNil(), "the target runs the host controller (testenv.Options.Hosts)")
	g.Eventually(func() error {
		for _, h := range hostNames(f) {
			ns, name, _ := strings.Cut(h, "/")
			if activity.Reconciled(ns, name) == 0 {
				return fmt.Errorf("the target's host controller has not reconciled BareMetalHost %s yet", h)
			}
		}
		return hostsProvisionedFor(ctx, env.Target, f)
	}, hostsProvisionedBound, time.Second).Should(Succeed(),
		"the target's host controller looks at every host, which then holds its image for its consumer's copy")
	settled := len(provisionsOf(f, from))
	g.Consistently(func() int { return len(provisionsOf(f, from)) }, hostsQuietWindow, time.Second).
		Should(Equal(settled), "no host is provisioned late")
	g.Expect(listIn(ctx, env.Source.Client, hostprovider.GroupVersion.WithKind(hostprovider.Kind), f.Namespaces)).
		To(BeEmpty(), "the hosts left the source")
	return provisionsOf(f, from)
}

// hostsProvisionedFor returns why a host of the fleet in m is not
// provisioned for its consumer as m holds it, or m lacks one.
func hostsProvisionedFor(ctx context.Context, m *testenv.Management, f *fleet.Fleet) error {
	n, err := hostprovider.CheckProvisioned(ctx, m.Client, f.Namespaces)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if want := len(hostNames(f)); n != want {
		return fmt.Errorf("%s holds %d of the fleet's %d BareMetalHosts", m.Name, n, want)
	}
	return nil
}

// hostNames are the fleet's hosts, as namespace/name.
func hostNames(f *fleet.Fleet) []string {
	var out []string
	for _, wc := range f.Clusters {
		for _, h := range wc.Hosts {
			out = append(out, wc.Namespace+"/"+h)
		}
	}
	return out
}

// provisionsOf returns the Provision events of the fleet's hosts after the
// cloud event from.
func provisionsOf(f *fleet.Fleet, from int64) []cloud.Event {
	keep := takeover.InFleet(f)
	var out []cloud.Event
	for _, e := range env.Cloud.EventsSince(from) {
		if e.Type == cloud.Provision && keep(e.Caller.Namespace, "") {
			out = append(out, e)
		}
	}
	return out
}

// provisionedHosts names the host of each Provision event, as
// namespace/name.
func provisionedHosts(events []cloud.Event) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.Host)
	}
	return out
}

func describeProvision(e cloud.Event) string {
	return fmt.Sprintf("%s BareMetalHost %s with %s, by the %s cluster's host controller", e.Time.Format("15:04:05.000"), e.Host, e.Image, e.Caller.ManagementCluster)
}
