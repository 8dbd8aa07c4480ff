//go:build cluster

package livecontrollers_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/devfleet"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/registry"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// TestTheFleetOfALostManagementClusterComesBackFromItsBackup is the
// disaster drill. A management cluster of its own (every controller live,
// on the clouds the others share) runs a fleet of every shape and one of
// hosts that keep their provisioning state in status, and one of Cluster
// API's own in-memory provider (CAPD) on its shared cloud; the operator
// installed there backs it up, encrypted, to a real registry
// (CNCF Distribution). The cluster is then lost: its controllers stop, its
// processes end, its data is removed. The target management cluster, its
// providers installed as clusterctl init leaves them and the operator
// installed as users install it, restores the archive by its digest. Then
// the takeover check: no VM created, deleted or powered off; no Machine,
// infrastructure machine, KubeadmConfig or bootstrap Secret made again; no
// host provisioned again; every workload cluster's Nodes the same, by UID;
// the fleet Available for 45 s.
func TestTheFleetOfALostManagementClusterComesBackFromItsBackup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := testenv.RepositoryRoot("go test ./test/livecontrollers/")
	g.Expect(err).NotTo(HaveOccurred())
	prefix := "drill" + rand.String(4)

	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	lost, err := env.StartManagement(startCtx, prefix)
	g.Expect(err).NotTo(HaveOccurred())
	gone := false
	t.Cleanup(func() {
		if !gone {
			_ = lost.Lose()
		}
	})
	reg, err := registry.Start(startCtx, t.TempDir(), registry.Options{User: "backup", Password: "s3cret"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(reg.Stop)
	repository := reg.Host + "/drill/" + prefix
	auth := base64.StdEncoding.EncodeToString([]byte("backup:s3cret"))
	dockerConfig, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	g.Expect(err).NotTo(HaveOccurred())
	key, err := age.GenerateX25519Identity()
	g.Expect(err).NotTo(HaveOccurred())

	// The fleets, settled in the cluster that will be lost.
	live := &fleet.Live{Cloud: env.Cloud, Workload: env.Workload, ManagementCluster: lost.Name}
	shapes, err := fleet.Create(ctx, lost.Client, fleet.Options{Clusters: 3, Namespaces: []string{prefix + "-a", prefix + "-b"}, Name: prefix, Live: live})
	g.Expect(err).NotTo(HaveOccurred())
	hosts, err := fleet.Create(ctx, lost.Client, fleet.Options{Clusters: 1, Workers: ptr.To(2), Namespaces: []string{prefix + "-h"}, Name: prefix + "h", Live: live, Hosts: true})
	g.Expect(err).NotTo(HaveOccurred())
	devNamespace := prefix + "-d"
	g.Expect(lost.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}})).To(Succeed())
	dev, err := devfleet.Create(ctx, lost.Client, devfleet.Options{Namespace: devNamespace, Clusters: 2, Prefix: devNamespace})
	g.Expect(err).NotTo(HaveOccurred())
	// The loop provider's fleets, and CAPD's in-memory one, with the kinds
	// each provider reconciles.
	fleets := map[*fleet.Fleet]fleetKinds{shapes: loopKinds, hosts: loopKinds, dev: devKinds}
	loopNamespaces := append(append([]string{}, shapes.Namespaces...), hosts.Namespaces...)
	namespaces := append(append([]string{}, loopNamespaces...), dev.Namespaces...)
	t.Cleanup(func() { deleteNamespaces(t, namespaces) })
	ours := func(namespace, name string) bool {
		return takeover.InFleet(shapes)(namespace, name) || takeover.InFleet(hosts)(namespace, name) || takeover.InFleet(dev)(namespace, name)
	}
	g.Eventually(func() error {
		for f, kinds := range fleets {
			if err := clustersAvailable(ctx, lost, f); err != nil {
				return err
			}
			if err := reconciledByKinds(ctx, lost, f, kinds); err != nil {
				return err
			}
		}
		if err := hostsProvisionedFor(ctx, lost, hosts); err != nil {
			return err
		}
		return takeover.Quiet(lost, ours, quietBeforeMove)
	}, takeoverSettleBound, 2*time.Second).Should(Succeed(), "the fleets settle in the cluster that will be lost")
	before := map[*fleet.Fleet]fleetState{}
	for f, kinds := range fleets {
		before[f] = takeFleetStateOf(ctx, g, lost, f, kinds)
	}
	nodesBefore := workloadNodes(ctx, g, lost, loopNamespaces)
	g.Expect(nodesBefore).NotTo(BeEmpty())
	vmsBefore := vmsOf(ctx, g, dev)
	cloudBefore, inMemoryBefore := env.Cloud.LastSeq(), len(env.InMemory.Events())

	// The backup, by the operator installed in that cluster.
	op, err := mover.StartOperatorIn(startCtx, lost, env.Target, root, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	secret(ctx, g, lost, op.Namespace(), "backup-keys", map[string][]byte{"recipients": []byte(key.Recipient().String())}, "")
	secret(ctx, g, lost, op.Namespace(), "registry", map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}, corev1.SecretTypeDockerConfigJson)
	store := &movev1alpha1.OCIStore{Repository: repository, CredentialsSecretRef: &movev1alpha1.LocalSecretReference{Name: "registry"}}
	backupCtx, cancelBackup := context.WithTimeout(ctx, moveBound)
	defer cancelBackup()
	tl, backup, err := op.Move(backupCtx, nil, "drill-backup", namespaces, func(spec *movev1alpha1.MoveOperationSpec) {
		spec.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{OCI: store, RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-keys", Key: "recipients"}}}
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(backup.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", backup.Status.FailureReason, backup.Status.FailureMessage)
	location := backup.Status.Archive.Location
	g.Expect(location).To(HavePrefix(repository + "@sha256:"))
	t.Logf("backed up %d objects to %s in %s, the providers stopped for %s: %s", backup.Status.Archive.Objects, location,
		tl.Ended.Sub(tl.Began).Round(time.Millisecond), backup.Status.Archive.ControllersStoppedFor.Duration, tl)

	// The cluster is lost.
	g.Expect(op.Stop()).To(Succeed())
	g.Expect(lost.Lose()).To(Succeed())
	gone = true
	lostAt := time.Now()

	// The restore, by the operator installed in the new cluster.
	restorer, err := mover.StartOperatorIn(startCtx, env.Target, env.Source, root, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = restorer.Stop() })
	ns, sa := restorer.ServiceAccount()
	unbind, err := installed.AllowRestores(ctx, env.Target.Config, root, ns, sa)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(unbind)
	secret(ctx, g, env.Target, restorer.Namespace(), "restore-key", map[string][]byte{"identity": []byte(key.String())}, "")
	secret(ctx, g, env.Target, restorer.Namespace(), "registry", map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}, corev1.SecretTypeDockerConfigJson)
	targetWrites := len(env.Target.CAPI.Writes())
	restoreCtx, cancelRestore := context.WithTimeout(ctx, moveBound)
	defer cancelRestore()
	tl, restored, err := restorer.Move(restoreCtx, nil, "drill-restore", namespaces, func(spec *movev1alpha1.MoveOperationSpec) {
		spec.Target = movev1alpha1.TargetSpec{}
		spec.Source = &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{OCI: store, Location: location,
			IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: "restore-key", Key: "identity"}}}
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = restorer.Delete(context.Background(), restored) })
	g.Expect(restored.Status.Phase).To(Equal(movev1alpha1.PhaseDone), "%s: %s", restored.Status.FailureReason, restored.Status.FailureMessage)
	t.Logf("restored %d objects %s after the cluster was lost, in %s: %s", restored.Status.Progress.Copied,
		time.Since(lostAt).Round(time.Second), tl.Ended.Sub(tl.Began).Round(time.Millisecond), tl)

	// The takeover.
	g.Eventually(func() error {
		for f, kinds := range fleets {
			if err := reconciledByKinds(ctx, env.Target, f, kinds); err != nil {
				return err
			}
		}
		return hostsProvisionedFor(ctx, env.Target, hosts)
	}, reconcileBound, 2*time.Second).Should(Succeed(), "the new cluster's controllers, CAPD's included, reconcile the restored fleets")
	atReconcile := map[*fleet.Fleet]fleetState{}
	for f, kinds := range fleets {
		atReconcile[f] = takeFleetStateOf(ctx, g, env.Target, f, kinds)
	}
	g.Consistently(func() error {
		for f := range fleets {
			if err := clustersAvailable(ctx, env.Target, f); err != nil {
				return err
			}
		}
		return nil
	}, takeoverWindow, 5*time.Second).Should(Succeed(), "the restored fleets stay Available")
	for f, kinds := range fleets {
		after := takeFleetStateOf(ctx, g, env.Target, f, kinds)
		g.Expect(after.names()).To(Equal(before[f].names()), "the new cluster holds the Machines, infra machines, KubeadmConfigs and bootstrap Secrets the lost one held")
		g.Expect(after.uids).To(Equal(atReconcile[f].uids), "none was deleted and made again")
		g.Expect(after.templates).To(Equal(before[f].templates), "no topology rollout: the template references are the backup's")
	}
	for _, w := range env.Target.CAPI.Writes()[targetWrites:] {
		if ours(w.Namespace, w.Name) && churns(w) && w.Succeeded() {
			t.Errorf("a controller of the new cluster created or deleted a machine's object: %s", w)
		}
	}
	var disturbed []cloud.Event
	for _, e := range env.Cloud.EventsSince(cloudBefore) {
		if e.Type == cloud.PowerOn {
			continue
		}
		if e.Type == cloud.Provision && ours(e.Caller.Namespace, "") {
			disturbed = append(disturbed, e)
			continue
		}
		if ours(e.Caller.Namespace, "") || ours(vmNamespace(e.VMName), "") {
			disturbed = append(disturbed, e)
		}
	}
	g.Expect(disturbed).To(BeEmpty(), "no VM created, deleted or powered off, no host provisioned again, since the backup began")
	g.Expect(workloadNodes(ctx, g, env.Target, loopNamespaces)).To(Equal(nodesBefore), "every workload cluster's Nodes are the same, by UID")
	events := env.InMemory.Events()[inMemoryBefore:]
	g.Expect(events).To(BeEmpty(), "the in-memory cloud: no VM created or deleted since the backup began: %s", describeEvents(events))
	g.Expect(vmsOf(ctx, g, dev)).To(Equal(vmsBefore), "every in-memory workload cluster keeps its VMs")
	t.Logf("DRILL: the fleet of %d clusters came back from the registry into a new cluster with no VM, Machine, bootstrap data or host made again; writes to it by the new cluster's controllers: %s",
		len(shapes.Clusters)+len(hosts.Clusters)+len(dev.Clusters), summarize(env.Target.CAPI.Writes()[targetWrites:], func(ns string) bool { return ours(ns, "") }))
}

// secret creates a Secret in a cluster.
func secret(ctx context.Context, g Gomega, m *testenv.Management, namespace, name string, data map[string][]byte, typ corev1.SecretType) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data, Type: typ}
	g.Expect(m.Client.Create(ctx, s)).To(Succeed())
}

// workloadNodes are the Nodes of the namespaces' Machines, by name, with
// their UIDs in the workload API server: a Node made again has another.
func workloadNodes(ctx context.Context, g Gomega, m *testenv.Management, namespaces []string) map[string]types.UID {
	out := map[string]types.UID{}
	for _, ns := range namespaces {
		machines := &clusterv1.MachineList{}
		g.Expect(m.Client.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		for _, machine := range machines.Items {
			name := machine.Status.NodeRef.Name
			if name == "" {
				continue
			}
			node := &corev1.Node{}
			g.Expect(env.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed(), "Node %s of Machine %s/%s", name, ns, machine.Name)
			out[strings.Join([]string{ns, machine.Name, name}, "/")] = node.UID
		}
	}
	return out
}
