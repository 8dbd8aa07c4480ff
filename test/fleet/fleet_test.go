//go:build cluster

package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CAPI: true}, &env)
}

func TestAFleetOfThreeIsCreatedThroughTheWebhooksAsAProvisionedFleet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := env.Source.Client
	prefix := "f" + rand.String(5)
	opts := fleet.Options{Clusters: 3, Workers: ptr.To(2), Namespaces: []string{prefix + "-a", prefix + "-b"}, Name: prefix}
	f, err := fleet.Create(ctx, c, opts)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("fleet of %d clusters, %d objects, created in %s: %v", len(f.Clusters), f.Total(), f.Duration.Round(time.Millisecond), f.Objects)

	t.Run("every shape of cluster is there, one with a ClusterClass in another namespace", func(t *testing.T) {
		g := NewWithT(t)
		shapes := map[fleet.Shape]fleet.WorkloadCluster{}
		for _, wc := range f.Clusters {
			shapes[wc.Shape] = wc
		}
		g.Expect(shapes).To(HaveLen(3))
		cross := shapes[fleet.CrossNamespaceClusterClass]
		g.Expect(cross.ClassRef.Namespace).NotTo(Equal(cross.Namespace))
		cluster := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: cross.Namespace, Name: cross.Name}, cluster)).To(Succeed())
		g.Expect(cluster.Spec.Topology.ClassRef.Namespace).To(Equal(cross.ClassRef.Namespace))
	})

	t.Run("the objects went through the mutating webhooks", func(t *testing.T) {
		g := NewWithT(t)
		mds := &clusterv1.MachineDeploymentList{}
		g.Expect(c.List(ctx, mds, client.InNamespace(opts.Namespaces[0]))).To(Succeed())
		g.Expect(mds.Items).NotTo(BeEmpty())
		for _, md := range mds.Items {
			// The fixture leaves the selector empty; the defaulting webhook fills it.
			g.Expect(md.Spec.Selector.MatchLabels).To(HaveKeyWithValue(clusterv1.MachineDeploymentNameLabel, md.Name))
		}
	})

	t.Run("the validating webhooks are in force", func(t *testing.T) {
		g := NewWithT(t)
		kcp := &controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespaces[0], Name: "even"},
			Spec: controlplanev1.KubeadmControlPlaneSpec{
				Replicas: ptr.To[int32](2),
				Version:  "v1.34.2",
				MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LoopMachineTemplate", Name: "t"},
				}},
			},
		}
		// A stacked etcd needs an odd number of members; only the webhook knows.
		err := c.Create(ctx, kcp)
		g.Expect(err).To(MatchError(ContainSubstring(`admission webhook "validation.kubeadmcontrolplane.controlplane.cluster.x-k8s.io" denied the request`)))
		g.Expect(err).To(MatchError(ContainSubstring("even")))
	})

	t.Run("clusterctl's move preflight checks pass", func(t *testing.T) {
		g := NewWithT(t)
		for _, ns := range opts.Namespaces {
			clusters := &clusterv1.ClusterList{}
			g.Expect(c.List(ctx, clusters, client.InNamespace(ns))).To(Succeed())
			for _, cl := range clusters.Items {
				g.Expect(ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue(), "cluster %s", cl.Name)
				g.Expect(conditions.IsTrue(&cl, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue(), "cluster %s", cl.Name)
				g.Expect(ptr.Deref(cl.Status.Initialization.ControlPlaneInitialized, false)).To(BeTrue(), "cluster %s", cl.Name)
			}
			machines := &clusterv1.MachineList{}
			g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			for _, m := range machines.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s", m.Name)
			}
		}
	})

	snapOpts := snapshot.Options{Namespaces: f.Namespaces}
	first, err := snapshot.Take(ctx, c, snapOpts)
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("every object has the owners the Cluster API controllers give it", func(t *testing.T) {
		g := NewWithT(t)
		for _, o := range first.Objects {
			if !ofThisFleet(o, prefix) {
				continue // another test's objects
			}
			want, ok := wantOwners[o.Kind]
			g.Expect(ok).To(BeTrue(), "no expectation for the owners of %s", o.Key())
			g.Expect(want).To(ContainElement(ownersOf(o)), "owners of %s", o.Key())
			for _, owner := range o.Owners {
				ns := o.Namespace
				if owner.Kind == "LoopClusterIdentity.infrastructure.cluster.x-k8s.io" {
					ns = ""
				}
				_, found := first.Get(snapshot.Key{Kind: owner.Kind, Namespace: ns, Name: owner.Name})
				g.Expect(found).To(BeTrue(), "owner %s %s of %s must exist", owner.Kind, owner.Name, o.Key())
			}
		}
		kinds := first.Kinds()
		for _, kind := range []string{
			"Cluster.cluster.x-k8s.io", "ClusterClass.cluster.x-k8s.io", "Machine.cluster.x-k8s.io",
			"MachineSet.cluster.x-k8s.io", "MachineDeployment.cluster.x-k8s.io", "MachinePool.cluster.x-k8s.io",
			"MachineHealthCheck.cluster.x-k8s.io", "ClusterResourceSet.addons.cluster.x-k8s.io",
			"ClusterResourceSetBinding.addons.cluster.x-k8s.io", "IPAddressClaim.ipam.cluster.x-k8s.io",
			"IPAddress.ipam.cluster.x-k8s.io", "KubeadmControlPlane.controlplane.cluster.x-k8s.io",
			"KubeadmControlPlaneTemplate.controlplane.cluster.x-k8s.io", "KubeadmConfig.bootstrap.cluster.x-k8s.io",
			"KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io", "LoopCluster.infrastructure.cluster.x-k8s.io",
			"LoopClusterTemplate.infrastructure.cluster.x-k8s.io", "LoopMachine.infrastructure.cluster.x-k8s.io",
			"LoopMachineTemplate.infrastructure.cluster.x-k8s.io", "LoopMachinePool.infrastructure.cluster.x-k8s.io",
			"LoopClusterIdentity.infrastructure.cluster.x-k8s.io", "Secret", "ConfigMap",
		} {
			g.Expect(kinds).To(HaveKey(kind))
		}
		// kubeconfig, ca, etcd, sa, proxy per cluster; a bootstrap Secret per
		// Machine and MachinePool; a Secret per ClusterResourceSet; the
		// identity's credentials.
		secrets := 0
		for _, o := range first.Objects {
			if o.Kind == "Secret" && ofThisFleet(o, prefix) {
				secrets++
			}
		}
		g.Expect(secrets).To(Equal(3*5 + 3*3 + 3 + 2 + 1))
	})

	t.Run("a snapshot is stable across two reads", func(t *testing.T) {
		g := NewWithT(t)
		second, err := snapshot.Take(ctx, c, snapOpts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snapshot.Diff(first, second)).To(BeEmpty())

		withStatus := snapOpts
		withStatus.Status = true
		a, err := snapshot.Take(ctx, c, withStatus)
		g.Expect(err).NotTo(HaveOccurred())
		b, err := snapshot.Take(ctx, c, withStatus)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snapshot.Diff(a, b)).To(BeEmpty())
	})

	t.Run("a changed object shows in the diff", func(t *testing.T) {
		g := NewWithT(t)
		wc := f.Clusters[0]
		cluster := &clusterv1.Cluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, cluster)).To(Succeed())
		cluster.Labels["changed"] = "yes"
		g.Expect(c.Update(ctx, cluster)).To(Succeed())
		after, err := snapshot.Take(ctx, c, snapOpts)
		g.Expect(err).NotTo(HaveOccurred())
		d := snapshot.Diff(first, after)
		g.Expect(d).To(ContainSubstring("~ Cluster.cluster.x-k8s.io " + wc.Namespace + "/" + wc.Name + " differs"))
		g.Expect(d).To(ContainSubstring(`"changed"`))
		g.Expect(strings.Count(d, "~ ")).To(Equal(1), d)
	})
}

// ofThisFleet reports objects of the fleet named prefix: in its namespaces,
// or named after it (its identity and the identity's credentials).
func ofThisFleet(o snapshot.Object, prefix string) bool {
	return strings.HasPrefix(o.Namespace, prefix) || strings.HasPrefix(o.Name, prefix)
}

// ownersOf renders an object's owners as "Kind(controller)" strings.
func ownersOf(o snapshot.Object) []string {
	out := []string{}
	for _, owner := range o.Owners {
		s := strings.SplitN(owner.Kind, ".", 2)[0]
		if owner.Controller {
			s += "*"
		}
		out = append(out, s)
	}
	return out
}

// wantOwners is Cluster API's owner reference table (docs/book, "Owner
// References"), plus the loop provider's and IPAM's; "*" marks a controller
// reference.
var wantOwners = map[string][][]string{
	"Cluster.cluster.x-k8s.io":                                  {{}},
	"ClusterClass.cluster.x-k8s.io":                             {{}},
	"MachineDeployment.cluster.x-k8s.io":                        {{"Cluster"}},
	"MachineSet.cluster.x-k8s.io":                               {{"MachineDeployment*"}},
	"Machine.cluster.x-k8s.io":                                  {{"MachineSet*"}, {"KubeadmControlPlane*"}},
	"MachineHealthCheck.cluster.x-k8s.io":                       {{"Cluster"}},
	"MachinePool.cluster.x-k8s.io":                              {{"Cluster"}},
	"ClusterResourceSet.addons.cluster.x-k8s.io":                {{}},
	"ClusterResourceSetBinding.addons.cluster.x-k8s.io":         {{"ClusterResourceSet"}},
	"KubeadmControlPlane.controlplane.cluster.x-k8s.io":         {{"Cluster*"}},
	"KubeadmControlPlaneTemplate.controlplane.cluster.x-k8s.io": {{"ClusterClass"}},
	"KubeadmConfig.bootstrap.cluster.x-k8s.io":                  {{"Machine*"}, {"MachinePool*"}},
	"KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io":          {{"Cluster"}, {"ClusterClass"}},
	"LoopCluster.infrastructure.cluster.x-k8s.io":               {{"Cluster*"}},
	"LoopClusterTemplate.infrastructure.cluster.x-k8s.io":       {{"ClusterClass"}},
	"LoopMachine.infrastructure.cluster.x-k8s.io":               {{"Machine*"}},
	"LoopMachineTemplate.infrastructure.cluster.x-k8s.io":       {{"Cluster"}, {"ClusterClass"}},
	"LoopMachinePool.infrastructure.cluster.x-k8s.io":           {{"MachinePool*"}},
	"LoopClusterIdentity.infrastructure.cluster.x-k8s.io":       {{}},
	"IPAddressClaim.ipam.cluster.x-k8s.io":                      {{"LoopMachine*"}},
	"IPAddress.ipam.cluster.x-k8s.io":                           {{"IPAddressClaim*"}},
	"Secret":                                                    {{"KubeadmControlPlane*"}, {"KubeadmConfig*"}, {"ClusterResourceSet"}, {"LoopClusterIdentity"}},
	"ConfigMap":                                                 {{"ClusterResourceSet"}},
}
