//go:build cluster

package livecontrollers_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/devfleet"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/inmemorycloud"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// devKinds are those of a devfleet: CAPD's, and no MachinePool.
var devKinds = fleetKinds{
	status: []schema.GroupVersionKind{
		clusterv1.GroupVersion.WithKind("Cluster"),
		clusterv1.GroupVersion.WithKind("Machine"),
		clusterv1.GroupVersion.WithKind("MachineSet"),
		clusterv1.GroupVersion.WithKind("MachineDeployment"),
		statusKinds[len(statusKinds)-1], // KubeadmControlPlane
	},
	provisioned: map[schema.GroupVersionKind]string{
		capiprovider.DevGroupVersion.WithKind(capiprovider.DevClusterKind): "provisioned",
		capiprovider.DevGroupVersion.WithKind(capiprovider.DevMachineKind): "provisioned",
		bootstrapv1.GroupVersion.WithKind("KubeadmConfig"):                 "dataSecretCreated",
	},
	infraMachine: capiprovider.DevGroupVersion.WithKind(capiprovider.DevMachineKind),
}

// TestTheTargetTakesOverAFleetOfCAPDsInMemoryProvider is the takeover test
// on a provider nobody here wrote: Cluster API's own development provider
// (CAPD) with its in-memory backend, its machines in the in-memory cloud
// both clusters' CAPD share. The fleet is created from upstream's templates
// as a user would, provisioned by the source's controllers, and moved with
// every controller live. The cloud is the witness: no VM is created or
// deleted by the move or after it, and every workload cluster keeps its
// VMs.
func TestTheTargetTakesOverAFleetOfCAPDsInMemoryProvider(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	op := startOperator(t)
	ns := "capd-" + rand.String(5)
	g.Expect(env.Source.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { deleteNamespaces(t, []string{ns}) })
	f, err := devfleet.Create(ctx, env.Source.Client, devfleet.Options{Namespace: ns, Clusters: 2, Prefix: ns})
	g.Expect(err).NotTo(HaveOccurred())
	ours := takeover.InFleet(f)
	g.Eventually(func() error {
		if err := reconciledByKinds(ctx, env.Source, f, devKinds); err != nil {
			return err
		}
		return takeover.Quiet(env.Source, ours, quietBeforeMove)
	}, takeoverSettleBound, 2*time.Second).Should(Succeed(), "CAPD provisions the fleet in the source")
	vmsBefore := vmsOf(ctx, g, f)
	t.Logf("provisioned by the source's controllers: %v", vmsBefore)
	g.Expect(createdBy(env.InMemory.Events(), env.Source.Name, ns)).To(Equal(vmsBefore), "the cloud recorded every VM, created by the source's CAPD")
	before := takeFleetStateOf(ctx, g, env.Source, f, devKinds)
	cloudMark := len(env.InMemory.Events())
	sourceWrites, targetWrites := len(env.Source.CAPI.Writes()), len(env.Target.CAPI.Writes())

	moveCtx, cancel := context.WithTimeout(ctx, moveBound)
	defer cancel()
	tl, mo, err := op.Move(moveCtx, nil, "capd-"+ns, f.Namespaces)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = op.Delete(context.Background(), mo) })
	g.Expect(mo.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
	t.Logf("moved in %s: %s", tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)
	quietFrom, quietTo := tl.Reached(string(movev1alpha1.PhaseCopying)), tl.Reached(string(movev1alpha1.PhaseRestoringTarget))
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		expectStoppedBetween(t, m, quietFrom, quietTo)
	}

	g.Eventually(func() error { return reconciledByKinds(ctx, env.Target, f, devKinds) }, reconcileBound, 2*time.Second).
		Should(Succeed(), "the target's controllers, CAPD's included, reconcile the whole fleet")
	atReconcile := takeFleetStateOf(ctx, g, env.Target, f, devKinds)
	g.Consistently(func() error { return clustersAvailable(ctx, env.Target, f) }, takeoverWindow, 5*time.Second).
		Should(Succeed(), "the moved fleet stays Available in the target")
	after := takeFleetStateOf(ctx, g, env.Target, f, devKinds)
	g.Expect(after.names()).To(Equal(before.names()), "the target holds the Machines, DevMachines, KubeadmConfigs and bootstrap Secrets the source held")
	g.Expect(after.uids).To(Equal(atReconcile.uids), "none was deleted and made again in the target")
	g.Expect(after.templates).To(Equal(before.templates), "no rollout: the template references are the source's")

	expectNoMachineChurn(t, env.Target.CAPI.Writes()[targetWrites:], ours)
	var touched []capiprovider.Write
	for _, w := range env.Source.CAPI.Writes()[sourceWrites:] {
		if ours(w.Namespace, w.Name) && w.Time.After(quietFrom) {
			touched = append(touched, w)
		}
	}
	g.Expect(touched).To(BeEmpty(), "the source's controllers, CAPD's included, back up, touch nothing that moved")
	events := env.InMemory.Events()[cloudMark:]
	g.Expect(events).To(BeEmpty(), "the in-memory cloud: no VM created or deleted since the move began: %s", describeEvents(events))
	g.Expect(vmsOf(ctx, g, f)).To(Equal(vmsBefore), "every workload cluster keeps its VMs")
	t.Logf("TAKEOVER (CAPD in-memory): no VM or Machine created or deleted; the target's controllers reconciled the fleet of %d clusters (%d Machines, %d VMs)",
		len(f.Clusters), len(before.uids[machineKey]), countVMs(vmsBefore))
}

// expectNoMachineChurn fails for every write that created or deleted a
// machine's object of the fleet.
func expectNoMachineChurn(t *testing.T, writes []capiprovider.Write, ours func(namespace, name string) bool) {
	t.Helper()
	for _, w := range writes {
		if ours(w.Namespace, w.Name) && churns(w) && w.Succeeded() {
			t.Errorf("a controller created or deleted a machine's object: %s", w)
		}
	}
}

// vmsOf lists each workload cluster's VMs in the in-memory cloud.
func vmsOf(ctx context.Context, g Gomega, f *fleet.Fleet) map[string][]string {
	out := map[string][]string{}
	for _, wc := range f.Clusters {
		vms, err := env.InMemory.VMs(ctx, wc.Namespace+"/"+wc.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(vms).NotTo(BeEmpty(), "cluster %s has VMs", wc.Name)
		out[wc.Name] = vms
	}
	return out
}

// createdBy lists, per workload cluster of namespace, the VMs the
// management cluster's CAPD created and did not delete.
func createdBy(events []inmemorycloud.Event, managementCluster, namespace string) map[string][]string {
	live := map[string]map[string]bool{}
	for _, e := range events {
		ns, cluster, _ := strings.Cut(e.ResourceGroup, "/")
		if e.ManagementCluster != managementCluster || ns != namespace {
			continue
		}
		if live[cluster] == nil {
			live[cluster] = map[string]bool{}
		}
		live[cluster][e.VM] = e.Op == inmemorycloud.Created
	}
	out := map[string][]string{}
	for cluster, vms := range live {
		for vm, alive := range vms {
			if alive {
				out[cluster] = append(out[cluster], vm)
			}
		}
		sort.Strings(out[cluster])
	}
	return out
}

func countVMs(vms map[string][]string) int {
	n := 0
	for _, v := range vms {
		n += len(v)
	}
	return n
}

// describeEvents is for failure messages.
func describeEvents(events []inmemorycloud.Event) string {
	s := make([]string, len(events))
	for i, e := range events {
		s[i] = e.String()
	}
	return strings.Join(s, "; ")
}

// TestADevClusterWithoutAnnotationsIsNeverProvisioned shows the CAPD
// defect devfleet works around: v1.14.2's in-memory backend writes its
// listener into a DevCluster's annotations without making the map, so a
// DevCluster created with none, as upstream's templates make it, panics its
// reconciler on every try and is never provisioned. If this test fails,
// upstream fixed it: drop the workaround (devfleet.withAnnotation) and the
// note in docs/before-you-move.md.
func TestADevClusterWithoutAnnotationsIsNeverProvisioned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "capd-bare-" + rand.String(5)
	g.Expect(env.Source.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { deleteNamespaces(t, []string{ns}) })
	f, err := devfleet.Create(ctx, env.Source.Client, devfleet.Options{Namespace: ns, Clusters: 1, Prefix: ns, WithoutAnnotation: true})
	g.Expect(err).NotTo(HaveOccurred())
	logPath := filepath.Join(env.Source.LogDir, "controllers-"+capiprovider.DockerInfrastructureProvider+".log")
	g.Eventually(func() (string, error) {
		data, err := os.ReadFile(logPath)
		return string(data), err
	}, time.Minute, time.Second).Should(ContainSubstring("assignment to entry in nil map"), "CAPD's DevCluster reconciler panics")
	dc := &unstructured.Unstructured{}
	dc.SetGroupVersionKind(capiprovider.DevGroupVersion.WithKind(capiprovider.DevClusterKind))
	g.Consistently(func() (bool, error) {
		if err := env.Source.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: f.Clusters[0].Name}, dc); err != nil {
			return false, err
		}
		provisioned, _, _ := unstructured.NestedBool(dc.Object, "status", "initialization", "provisioned")
		return provisioned, nil
	}, 15*time.Second, time.Second).Should(BeFalse(), "a DevCluster without annotations is never provisioned")
}
