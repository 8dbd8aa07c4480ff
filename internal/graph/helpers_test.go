package graph

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The kinds of a management cluster as clusterctl init leaves it, plus the
// test provider's, at their storage versions.
var (
	gvkCluster           = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	gvkClusterClass      = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}
	gvkMachine           = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	gvkMachineSet        = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"}
	gvkMachineDeployment = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	gvkKCP               = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
	gvkKCPTemplate       = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneTemplate"}
	gvkKubeadmConfig     = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	gvkKubeadmConfigTmpl = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"}
	gvkInfraCluster      = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "TestCluster"}
	gvkInfraClusterTmpl  = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "TestClusterTemplate"}
	gvkInfraMachine      = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "TestMachine"}
	gvkInfraMachineTmpl  = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "TestMachineTemplate"}
	gvkIdentity          = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "TestClusterIdentity"}
	gvkWidget            = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "TestWidget"}
	gvkCRS               = schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"}
	gvkCRSBinding        = schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSetBinding"}
	gvkProvider          = schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "Provider"}
	gvkSecret            = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	gvkConfigMap         = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvkDeployment        = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	gvkOldMachineVersion = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Machine"}
)

func testTypes() *Types {
	ns := func(gvk schema.GroupVersionKind) Type { return Type{GVK: gvk, Namespaced: true} }
	identity := Type{GVK: gvkIdentity, MoveHierarchy: true} // cluster-scoped, CRD labelled move-hierarchy
	widget := Type{GVK: gvkWidget, Namespaced: true, Move: true}
	return NewTypes(append(CoreTypes(),
		ns(gvkCluster), ns(gvkClusterClass), ns(gvkMachine), ns(gvkMachineSet), ns(gvkMachineDeployment),
		ns(gvkKCP), ns(gvkKCPTemplate), ns(gvkKubeadmConfig), ns(gvkKubeadmConfigTmpl),
		ns(gvkInfraCluster), ns(gvkInfraClusterTmpl), ns(gvkInfraMachine), ns(gvkInfraMachineTmpl),
		ns(gvkCRS), ns(gvkCRSBinding), ns(gvkProvider), identity, widget,
	)...)
}

type option func(*unstructured.Unstructured)

// obj builds an object with a UID derived from its identity, so that tests
// can refer to owners by name.
func obj(gvk schema.GroupVersionKind, namespace, name string, opts ...option) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetUID(uidOf(gvk, namespace, name))
	for _, o := range opts {
		o(u)
	}
	return u
}

func uidOf(gvk schema.GroupVersionKind, namespace, name string) types.UID {
	return types.UID(fmt.Sprintf("uid-%s-%s-%s", strings.ToLower(gvk.Kind), namespace, name))
}

// ownedBy adds an owner reference to owner, as a controller reference when
// controller is true.
func ownedBy(owner *unstructured.Unstructured, controller bool) option {
	return func(u *unstructured.Unstructured) {
		ref := metav1.OwnerReference{
			APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
		}
		if controller {
			ref.Controller, ref.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
		}
		u.SetOwnerReferences(append(u.GetOwnerReferences(), ref))
	}
}

// ownedByRef adds an owner reference to an object that need not exist.
func ownedByRef(gvk schema.GroupVersionKind, name string, uid types.UID) option {
	return func(u *unstructured.Unstructured) {
		u.SetOwnerReferences(append(u.GetOwnerReferences(), metav1.OwnerReference{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: uid,
		}))
	}
}

func label(k, v string) option {
	return func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[k] = v
		u.SetLabels(l)
	}
}

func annotation(k, v string) option {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
		u.SetAnnotations(a)
	}
}

func field(value any, path ...string) option {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
			panic(err)
		}
	}
}

// topology makes a Cluster use a ClusterClass (v1beta2 fields); an empty
// namespace means the Cluster's own.
func topology(class, namespace string) option {
	ref := map[string]any{"name": class}
	if namespace != "" {
		ref["namespace"] = namespace
	}
	return field(ref, "spec", "topology", "classRef")
}

func templateRef(gvk schema.GroupVersionKind, name string) map[string]any {
	return map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "name": name}
}

// classTemplates gives a ClusterClass (v1beta2 fields) an infrastructure
// cluster template, a control plane template and one worker class.
func classTemplates(infra, controlPlane, workerInfra, workerBootstrap string) option {
	return func(u *unstructured.Unstructured) {
		field(map[string]any{"templateRef": templateRef(gvkInfraClusterTmpl, infra)}, "spec", "infrastructure")(u)
		field(map[string]any{"templateRef": templateRef(gvkKCPTemplate, controlPlane)}, "spec", "controlPlane")(u)
		field([]any{map[string]any{
			"class":          "default-worker",
			"infrastructure": map[string]any{"templateRef": templateRef(gvkInfraMachineTmpl, workerInfra)},
			"bootstrap":      map[string]any{"templateRef": templateRef(gvkKubeadmConfigTmpl, workerBootstrap)},
		}}, "spec", "workers", "machineDeployments")(u)
	}
}

func objects(groups ...[]*unstructured.Unstructured) []*unstructured.Unstructured {
	return slices.Concat(groups...)
}

// fleetCluster returns the objects Cluster API and a provider create for one
// provisioned Cluster: infrastructure cluster, control plane with one
// Machine, a MachineDeployment with a MachineSet and one Machine, the
// cluster Secrets, and the bootstrap data Secrets.
func fleetCluster(namespace, name string, clusterOpts ...option) []*unstructured.Unstructured {
	cluster := obj(gvkCluster, namespace, name, clusterOpts...)
	infra := obj(gvkInfraCluster, namespace, name, ownedBy(cluster, true))
	kcp := obj(gvkKCP, namespace, name+"-cp", ownedBy(cluster, true))
	cpTemplate := obj(gvkInfraMachineTmpl, namespace, name+"-cp", ownedBy(cluster, false))
	cpMachine := obj(gvkMachine, namespace, name+"-cp-0", ownedBy(kcp, true))
	cpConfig := obj(gvkKubeadmConfig, namespace, name+"-cp-0", ownedBy(cpMachine, true))
	cpInfraMachine := obj(gvkInfraMachine, namespace, name+"-cp-0", ownedBy(cpMachine, true))
	cpData := obj(gvkSecret, namespace, name+"-cp-0", ownedBy(cpConfig, true))
	md := obj(gvkMachineDeployment, namespace, name+"-md", ownedBy(cluster, false))
	mdTemplate := obj(gvkInfraMachineTmpl, namespace, name+"-md", ownedBy(cluster, false))
	mdConfigTemplate := obj(gvkKubeadmConfigTmpl, namespace, name+"-md", ownedBy(cluster, false))
	ms := obj(gvkMachineSet, namespace, name+"-md-abc", ownedBy(md, true))
	worker := obj(gvkMachine, namespace, name+"-md-abc-0", ownedBy(ms, true))
	workerConfig := obj(gvkKubeadmConfig, namespace, name+"-md-abc-0", ownedBy(worker, true))
	workerInfra := obj(gvkInfraMachine, namespace, name+"-md-abc-0", ownedBy(worker, true))
	workerData := obj(gvkSecret, namespace, name+"-md-abc-0", ownedBy(workerConfig, true))
	kubeconfig := obj(gvkSecret, namespace, name+"-kubeconfig", ownedBy(kcp, true))
	ca := obj(gvkSecret, namespace, name+"-ca", ownedBy(kcp, true))
	etcd := obj(gvkSecret, namespace, name+"-etcd", ownedBy(kcp, true))
	sa := obj(gvkSecret, namespace, name+"-sa", ownedBy(kcp, true))
	proxy := obj(gvkSecret, namespace, name+"-proxy", ownedBy(kcp, true))
	return []*unstructured.Unstructured{
		cluster, infra, kcp, cpTemplate, cpMachine, cpConfig, cpInfraMachine, cpData,
		md, mdTemplate, mdConfigTemplate, ms, worker, workerConfig, workerInfra, workerData,
		kubeconfig, ca, etcd, sa, proxy,
	}
}

// build returns a graph of the given objects, failing the test on error.
func build(t *testing.T, namespaces []string, objs ...*unstructured.Unstructured) *Graph {
	t.Helper()
	g := New(testTypes(), namespaces)
	for _, o := range objs {
		if err := g.Add(o); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	return g
}

// name is how tests name an object: "Kind ns/name" (short kind, no group).
func name(r ObjectRef) string {
	if r.Namespace == "" {
		return r.GVK.Kind + " " + r.Name
	}
	return r.GVK.Kind + " " + r.Namespace + "/" + r.Name
}

func nameOf(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// groupsOf returns the plan's groups as object names.
func groupsOf(p *Plan) [][]string {
	var out [][]string
	for _, g := range p.Groups {
		var names []string
		for _, o := range g {
			names = append(names, name(o.ObjectRef))
		}
		out = append(out, names)
	}
	return out
}

// groupIndex returns the creation group of an object, or -1 when it does not move.
func groupIndex(p *Plan, u *unstructured.Unstructured) int {
	if o, ok := p.Object(u.GetUID()); ok {
		return o.Group
	}
	return -1
}

func moved(p *Plan) []string {
	var out []string
	for _, o := range p.Objects() {
		out = append(out, name(o.ObjectRef))
	}
	slices.Sort(out)
	return out
}

func kept(p *Plan) []string {
	var out []string
	for _, o := range p.Objects() {
		if !o.Delete {
			out = append(out, name(o.ObjectRef))
		}
	}
	slices.Sort(out)
	return out
}

func excluded(p *Plan, reason ExclusionReason) []string {
	var out []string
	for _, e := range p.Excluded {
		if e.Reason == reason {
			out = append(out, name(e.ObjectRef))
		}
	}
	slices.Sort(out)
	return out
}

func exclusionOf(p *Plan, u *unstructured.Unstructured) (Exclusion, bool) {
	for _, e := range p.Excluded {
		if e.UID == u.GetUID() {
			return e, true
		}
	}
	return Exclusion{}, false
}

func names(objs ...*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, nameOf(o))
	}
	slices.Sort(out)
	return out
}

// namesOf returns the names of every object in a set.
func namesOf(objs []*unstructured.Unstructured) []string { return names(objs...) }
