// Package graphtest builds, in memory and without any cluster, a fleet of
// workload clusters shaped like the test fixture's (package test/fleet): the
// same kinds, the same ownership, names and UIDs of the same lengths. It
// exists to measure what the move's graph and plan keep per object at fleet
// sizes no local cluster holds in a unit test's time. It never talks to an
// API server and is used only by tests.
package graphtest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// The fixture's kinds at their storage versions.
var (
	Cluster                 = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	ClusterClass            = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}
	Machine                 = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	MachineSet              = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"}
	MachineDeployment       = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	MachineHealthCheck      = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineHealthCheck"}
	MachinePool             = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"}
	KubeadmControlPlane     = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
	KubeadmControlPlaneTmpl = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneTemplate"}
	KubeadmConfig           = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	KubeadmConfigTemplate   = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"}
	LoopCluster             = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopCluster"}
	LoopClusterTemplate     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopClusterTemplate"}
	LoopClusterIdentity     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopClusterIdentity"}
	LoopMachine             = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopMachine"}
	LoopMachineTemplate     = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopMachineTemplate"}
	LoopMachinePool         = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopMachinePool"}
	IPAddressClaim          = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddressClaim"}
	IPAddress               = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddress"}
	ClusterResourceSet      = schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"}
	ClusterResourceSetBind  = schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSetBinding"}
	Secret                  = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	ConfigMap               = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

// Types returns the kinds of the fixture's management cluster as discovery
// finds them: the identity is cluster-scoped and labelled move-hierarchy.
func Types() *graph.Types {
	namespaced := []schema.GroupVersionKind{
		Cluster, ClusterClass, Machine, MachineSet, MachineDeployment, MachineHealthCheck, MachinePool,
		KubeadmControlPlane, KubeadmControlPlaneTmpl, KubeadmConfig, KubeadmConfigTemplate,
		LoopCluster, LoopClusterTemplate, LoopMachine, LoopMachineTemplate, LoopMachinePool,
		IPAddressClaim, IPAddress, ClusterResourceSet, ClusterResourceSetBind,
	}
	ts := graph.CoreTypes()
	for _, gvk := range namespaced {
		ts = append(ts, graph.Type{GVK: gvk, Namespaced: true})
	}
	ts = append(ts, graph.Type{GVK: LoopClusterIdentity, MoveHierarchy: true})
	return graph.NewTypes(ts...)
}

// HalfLabel is on every Cluster, "a" on even ones and "b" on odd ones, so
// that a cluster selector can take half the fleet.
const HalfLabel = "graphtest.move.cluster.x-k8s.io/half"

// Options shape a fleet. The zero value is the benchmark's fleet (package
// test/bench): three control-plane and three worker Machines per cluster,
// in one namespace, with a ClusterClass used from another namespace.
type Options struct {
	// Clusters is the number of workload clusters.
	Clusters int
	// Namespace holds the workload clusters; "fleet" when empty.
	Namespace string
}

// ObjectsPerCluster is how many objects one workload cluster has (three
// control-plane and three worker Machines, a MachinePool, an IP address
// pair, the cluster Secrets, and a ClusterResourceSetBinding), as in the
// benchmark's fixture.
const ObjectsPerCluster = 45

// SharedObjects is how many objects the clusters share: the identity and
// its Secret, the ClusterClass and its five templates, the
// ClusterResourceSet with its Secret and ConfigMap.
const SharedObjects = 11

// Fleet calls each for every object of the fleet, one workload cluster at a
// time, as discovery would receive them: each object is decoded from JSON
// (as metadata only, except for the kinds discovery reads whole), so that
// the strings it holds are its own, as they are when read from an API
// server. Nothing is kept between calls: the caller decides what stays.
func Fleet(opts Options, each func(client.Object) error) error {
	ns := opts.Namespace
	if ns == "" {
		ns = "fleet"
	}
	f := &fleet{namespace: ns, classNamespace: ns + "-classes", each: each}
	f.shared()
	for i := range opts.Clusters {
		f.cluster(i)
	}
	return f.err
}

type fleet struct {
	namespace, classNamespace string
	each                      func(client.Object) error
	err                       error
	rv                        int
}

// object is an object to emit, built as a map and then round-tripped
// through JSON.
type object struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	owners    []metav1.OwnerReference
	labels    map[string]string
	spec      map[string]any
}

func (o *object) uid() types.UID { return UID(o.gvk, o.namespace, o.name) }

// ref returns a reference to o as an owner, controller or not.
func (o *object) ref(controller bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: o.gvk.GroupVersion().String(), Kind: o.gvk.Kind, Name: o.name, UID: o.uid()}
	if controller {
		t := true
		r.Controller, r.BlockOwnerDeletion = &t, &t
	}
	return r
}

// UID derives a UID of the real length (36 characters) from an object's
// identity, so that owners are found by the UID their dependents name.
func UID(gvk schema.GroupVersionKind, namespace, name string) types.UID {
	h := fnv.New128a()
	_, _ = fmt.Fprintf(h, "%s/%s/%s/%s", gvk.Group, gvk.Kind, namespace, name)
	b := h.Sum(nil)
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

// emit encodes an object as an API server would send it and hands the
// decoded copy to each.
func (f *fleet) emit(o *object) *object {
	if f.err != nil {
		return o
	}
	f.rv++
	meta := map[string]any{
		"name":              o.name,
		"uid":               string(o.uid()),
		"resourceVersion":   fmt.Sprint(1000000 + f.rv),
		"generation":        int64(1),
		"creationTimestamp": "2026-01-01T00:00:00Z",
		"finalizers":        []any{"cluster.x-k8s.io/finalizer"},
	}
	if o.namespace != "" {
		meta["namespace"] = o.namespace
	}
	if len(o.owners) > 0 {
		meta["ownerReferences"] = o.owners
	}
	if len(o.labels) > 0 {
		meta["labels"] = o.labels
	}
	u := map[string]any{"apiVersion": o.gvk.GroupVersion().String(), "kind": o.gvk.Kind, "metadata": meta}
	if o.spec != nil {
		u["spec"] = o.spec
	}
	data, err := json.Marshal(u)
	if err != nil {
		f.err = fmt.Errorf("encoding %s %s/%s: %w", o.gvk.Kind, o.namespace, o.name, err)
		return o
	}
	gk := o.gvk.GroupKind()
	var decoded client.Object
	if gk == Cluster.GroupKind() || gk == ClusterClass.GroupKind() || gk == ClusterResourceSetBind.GroupKind() {
		obj := &unstructured.Unstructured{}
		err = obj.UnmarshalJSON(data)
		decoded = obj
	} else {
		obj := &metav1.PartialObjectMetadata{}
		err = json.Unmarshal(data, obj)
		obj.SetGroupVersionKind(o.gvk)
		decoded = obj
	}
	if err != nil {
		f.err = fmt.Errorf("decoding %s %s/%s: %w", o.gvk.Kind, o.namespace, o.name, err)
		return o
	}
	if err := f.each(decoded); err != nil {
		f.err = err
	}
	return o
}

func templateRef(gvk schema.GroupVersionKind, name string) map[string]any {
	return map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "name": name}
}

// shared emits what the fleet's clusters share: the cluster-scoped identity
// with its credentials Secret, the ClusterClass with its templates, and the
// ClusterResourceSet with its resources.
func (f *fleet) shared() {
	identity := f.emit(&object{gvk: LoopClusterIdentity, name: "fleet-identity",
		labels: map[string]string{graph.MoveHierarchyLabel: ""}})
	f.emit(&object{gvk: Secret, namespace: f.namespace, name: "fleet-identity-credentials", owners: []metav1.OwnerReference{identity.ref(false)}})

	class := &object{gvk: ClusterClass, namespace: f.classNamespace, name: "fleet-class", spec: map[string]any{
		"infrastructure": map[string]any{"templateRef": templateRef(LoopClusterTemplate, "fleet-class-cluster")},
		"controlPlane": map[string]any{
			"templateRef":           templateRef(KubeadmControlPlaneTmpl, "fleet-class-cp"),
			"machineInfrastructure": map[string]any{"templateRef": templateRef(LoopMachineTemplate, "fleet-class-cp")},
		},
		"workers": map[string]any{"machineDeployments": []any{map[string]any{
			"class":          "default-worker",
			"infrastructure": map[string]any{"templateRef": templateRef(LoopMachineTemplate, "fleet-class-md")},
			"bootstrap":      map[string]any{"templateRef": templateRef(KubeadmConfigTemplate, "fleet-class-md")},
		}}},
	}}
	f.emit(class)
	for _, t := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{
		{LoopClusterTemplate, "fleet-class-cluster"}, {KubeadmControlPlaneTmpl, "fleet-class-cp"},
		{LoopMachineTemplate, "fleet-class-cp"}, {LoopMachineTemplate, "fleet-class-md"}, {KubeadmConfigTemplate, "fleet-class-md"},
	} {
		f.emit(&object{gvk: t.gvk, namespace: f.classNamespace, name: t.name, owners: []metav1.OwnerReference{class.ref(false)}})
	}

	crs := f.emit(&object{gvk: ClusterResourceSet, namespace: f.namespace, name: "fleet-cni"})
	f.emit(&object{gvk: Secret, namespace: f.namespace, name: "fleet-cni-secret", owners: []metav1.OwnerReference{crs.ref(false)}})
	f.emit(&object{gvk: ConfigMap, namespace: f.namespace, name: "fleet-cni-config", owners: []metav1.OwnerReference{crs.ref(false)}})
}

// cluster emits the objects of workload cluster i (ObjectsPerCluster).
// Every third cluster uses the ClusterClass from the other namespace, as
// the fixture's cross-namespace shape does.
func (f *fleet) cluster(i int) {
	name := fmt.Sprintf("%s-%d", f.namespace, i)
	labels := map[string]string{"cluster.x-k8s.io/cluster-name": name}
	var clusterSpec map[string]any
	if i%3 == 2 {
		clusterSpec = map[string]any{"topology": map[string]any{
			"classRef": map[string]any{"name": "fleet-class", "namespace": f.classNamespace}, "version": "v1.34.2"}}
	}
	cluster := f.emit(&object{gvk: Cluster, namespace: f.namespace, name: name,
		labels: map[string]string{"cni": "loop", HalfLabel: []string{"a", "b"}[i%2]}, spec: clusterSpec})
	// Controllers own what they create with a controller reference;
	// Clusters own the rest with a plain one.
	controlledBy := func(owner *object) []metav1.OwnerReference { return []metav1.OwnerReference{owner.ref(true)} }
	ownedBy := func(owner *object) []metav1.OwnerReference { return []metav1.OwnerReference{owner.ref(false)} }
	emit := func(gvk schema.GroupVersionKind, name string, owners []metav1.OwnerReference) *object {
		return f.emit(&object{gvk: gvk, namespace: f.namespace, name: name, owners: owners, labels: labels})
	}

	emit(LoopCluster, name+"-x7k2p", controlledBy(cluster))
	kcp := emit(KubeadmControlPlane, name+"-cp-q9f4w", controlledBy(cluster))
	emit(LoopMachineTemplate, name+"-cp-h2m8s", ownedBy(cluster))
	var firstLoopMachine *object
	machine := func(base string, owner *object) {
		m := emit(Machine, base, controlledBy(owner))
		config := emit(KubeadmConfig, base, controlledBy(m))
		lm := emit(LoopMachine, base, controlledBy(m))
		emit(Secret, base, controlledBy(config))
		if firstLoopMachine == nil {
			firstLoopMachine = lm
		}
	}
	for j := range 3 {
		machine(fmt.Sprintf("%s-cp-q9f4w-%05d", name, j), kcp)
	}
	for _, purpose := range []string{"kubeconfig", "ca", "etcd", "sa", "proxy"} {
		emit(Secret, name+"-"+purpose, controlledBy(kcp))
	}

	md := emit(MachineDeployment, name+"-md-0", ownedBy(cluster))
	emit(LoopMachineTemplate, name+"-md-0-t5v8n", ownedBy(cluster))
	emit(KubeadmConfigTemplate, name+"-md-0-b3r6c", ownedBy(cluster))
	ms := emit(MachineSet, name+"-md-0-6d8f9", controlledBy(md))
	for j := range 3 {
		machine(fmt.Sprintf("%s-md-0-6d8f9-%05d", name, j), ms)
	}
	emit(MachineHealthCheck, name+"-mhc", ownedBy(cluster))

	pool := emit(MachinePool, name+"-mp-0", ownedBy(cluster))
	poolConfig := emit(KubeadmConfig, name+"-mp-0-k4d7z", controlledBy(pool))
	emit(LoopMachinePool, name+"-mp-0", controlledBy(pool))
	emit(Secret, name+"-mp-0-k4d7z", controlledBy(poolConfig))

	claim := emit(IPAddressClaim, firstLoopMachine.name, controlledBy(firstLoopMachine))
	emit(IPAddress, firstLoopMachine.name, controlledBy(claim))

	f.emit(&object{gvk: ClusterResourceSetBind, namespace: f.namespace, name: name,
		owners: ownedBy(cluster), spec: map[string]any{"clusterName": name}})
}
