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
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/testenv"
)

// Bounds of the settling test.
const (
	// settleBound is how long a fresh fleet may take to be Available with
	// the controllers running: the first reconciles of every object, and
	// the ClusterCache connecting to each workload cluster.
	settleBound = 3 * time.Minute
	// settleWindow is how long every Cluster must have been Available.
	settleWindow = 30 * time.Second
	// quietPeriod is how long a settled fleet is watched.
	quietPeriod = time.Minute
)

func TestAFreshFleetOfThreeSettlesAndStaysSettled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := env.Source
	prefix := "s" + rand.String(4)
	cloudBefore := env.Cloud.LastSeq()
	writesBefore := len(m.CAPI.Writes())
	opts := fleet.Options{
		Clusters:   3,
		Namespaces: []string{prefix + "-a", prefix + "-b"},
		Name:       prefix,
		Live:       &fleet.Live{Cloud: env.Cloud, Workload: env.Workload, ManagementCluster: m.Name},
	}
	began := time.Now()
	f, err := fleet.Create(ctx, m.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	shapes := map[fleet.Shape]bool{}
	for _, wc := range f.Clusters {
		shapes[wc.Shape] = true
	}
	g.Expect(shapes).To(HaveLen(3), "classic, ClusterClass and cross-namespace ClusterClass")
	machines := 0
	for _, wc := range f.Clusters {
		machines += len(wc.Machines)
	}
	vms := machines + len(f.Clusters) // one MachinePool instance per cluster
	t.Logf("fleet of %d clusters (%d Machines, %d VMs) created in %s", len(f.Clusters), machines, vms, f.Duration.Round(time.Millisecond))

	// The fixture writes the statuses the controllers compute, Available
	// included: settled means Available for settleWindow on end, once the
	// controllers have reconciled everything (workload clusters connected).
	available := func() error {
		for _, wc := range f.Clusters {
			c := &clusterv1.Cluster{}
			if err := m.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, c); err != nil {
				return err
			}
			if !conditions.IsTrue(c, clusterv1.ClusterAvailableCondition) {
				return fmt.Errorf("cluster %s is not Available: %s", wc.Name, describe(c))
			}
		}
		return nil
	}
	var since time.Time
	g.Eventually(func() error {
		if err := available(); err != nil {
			since = time.Time{}
			return err
		}
		if since.IsZero() {
			since = time.Now()
		}
		if held := time.Since(since); held < settleWindow {
			return fmt.Errorf("every Cluster Available for %s only", held.Round(time.Second))
		}
		return nil
	}, settleBound, 2*time.Second).Should(Succeed(), func() string {
		return "a fresh fleet settles within " + settleBound.String() + "\n" + machineReport(ctx, m, f)
	})
	t.Logf("every Cluster Available, and for %s, %s after creation began", settleWindow, time.Since(began).Round(time.Millisecond))

	settled := time.Now()
	g.Consistently(available, quietPeriod, 5*time.Second).Should(Succeed(), "a settled fleet stays Available")

	ours := func(ns string) bool { return strings.HasPrefix(ns, prefix) }
	writes := m.CAPI.Writes()[writesBefore:]
	var quiet []capiprovider.Write
	for _, w := range writes {
		if !ours(w.Namespace) {
			continue
		}
		if w.Kind == "Machine" && (w.Verb == "create" || w.Verb == "delete") {
			t.Errorf("a Machine was created or deleted: %s", w)
		}
		if w.Time.After(settled) {
			quiet = append(quiet, w)
		}
	}
	t.Logf("writes by the controllers to the fleet since its creation: %s", summarize(writes, ours))
	t.Logf("of which in the quiet minute: %s", summarize(quiet, ours))
	for i, w := range quiet {
		if i == 20 {
			t.Logf("  ... and %d more", len(quiet)-i)
			break
		}
		t.Logf("  %s", w)
	}

	var created, other []cloud.Event
	for _, e := range env.Cloud.EventsSince(cloudBefore) {
		if !ours(e.Caller.Namespace) {
			continue
		}
		if e.Type == cloud.Created {
			created = append(created, e)
		} else {
			other = append(other, e)
		}
	}
	g.Expect(created).To(HaveLen(vms), "one VM per Machine and MachinePool instance, created with the fleet")
	g.Expect(other).To(BeEmpty(), "no VM deleted or powered off")
	for _, e := range created {
		g.Expect(e.Time).To(BeTemporally("<", began.Add(f.Duration)), "VM %s created by %s after the fleet was made", e.VMName, e.Caller)
	}
}

// describe renders a Cluster's conditions that are not as a healthy one's.
func describe(c *clusterv1.Cluster) string {
	var out []string
	for _, cond := range c.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s(%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	return fmt.Sprintf("infrastructureProvisioned=%t %s", ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false), strings.Join(out, "; "))
}

// summarize counts writes by verb and kind.
func summarize(writes []capiprovider.Write, keep func(string) bool) string {
	counts := map[string]int{}
	for _, w := range writes {
		if keep(w.Namespace) {
			sub := ""
			if w.Subresource != "" {
				sub = "/" + w.Subresource
			}
			counts[w.Provider+" "+w.Verb+" "+w.Kind+sub]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, counts[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// machineReport lists the conditions of the fleet's Machines that are not
// as a healthy Machine's, and the workload Nodes, for a failure message.
func machineReport(ctx context.Context, m *testenv.Management, f *fleet.Fleet) string {
	var out []string
	for _, ns := range f.Namespaces {
		machines := &clusterv1.MachineList{}
		if err := m.Client.List(ctx, machines, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, machine := range machines.Items {
			for _, c := range machine.Status.Conditions {
				bad := c.Status != metav1.ConditionTrue
				if c.Type == clusterv1.PausedCondition || c.Type == clusterv1.DeletingCondition {
					bad = c.Status != metav1.ConditionFalse
				}
				if bad {
					out = append(out, fmt.Sprintf("Machine %s/%s %s=%s %s: %s", ns, machine.Name, c.Type, c.Status, c.Reason, c.Message))
				}
			}
		}
	}
	prefix, _, _ := strings.Cut(f.Namespaces[0], "-")
	out = append(out, "writes: "+summarize(m.CAPI.Writes(), func(ns string) bool { return strings.HasPrefix(ns, prefix) }))
	nodes := &corev1.NodeList{}
	if err := env.Workload.Client.List(ctx, nodes); err != nil {
		out = append(out, err.Error())
	}
	for _, n := range nodes.Items {
		out = append(out, fmt.Sprintf("Node %s providerID %s", n.Name, n.Spec.ProviderID))
	}
	return strings.Join(out, "\n")
}
