package graph

import (
	"cmp"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// ObjectRef identifies an object of a move. For an object the graph has seen,
// GVK is its kind at the storage version, the version to read and write it at.
type ObjectRef struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	// UID is the object's UID in the cluster it was read from.
	UID types.UID
}

// GroupKind returns the group and kind of the object.
func (r ObjectRef) GroupKind() schema.GroupKind { return r.GVK.GroupKind() }

// Key returns the namespace and name of the object.
func (r ObjectRef) Key() client.ObjectKey {
	return client.ObjectKey{Namespace: r.Namespace, Name: r.Name}
}

// String names the object the way messages do: "Kind.group namespace/name".
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return KindString(r.GroupKind()) + " " + r.Name
	}
	return KindString(r.GroupKind()) + " " + r.Namespace + "/" + r.Name
}

func compareRefs(a, b ObjectRef) int {
	if c := compareKinds(a.GroupKind(), b.GroupKind()); c != 0 {
		return c
	}
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.UID, b.UID),
	)
}

// compareKinds orders kinds as their KindStrings sort, without building the
// strings: sorting a fleet's objects compares kinds about a million times,
// and building two strings each time was most of what planning allocated.
func compareKinds(a, b schema.GroupKind) int {
	if a == b {
		return 0
	}
	as, bs := kindStringParts(a), kindStringParts(b)
	na, nb := len(as[0])+len(as[1])+len(as[2]), len(bs[0])+len(bs[1])+len(bs[2])
	for i := range min(na, nb) {
		if c := cmp.Compare(byteAt(as, i), byteAt(bs, i)); c != 0 {
			return c
		}
	}
	return cmp.Compare(na, nb)
}

// kindStringParts returns the parts KindString joins.
func kindStringParts(gk schema.GroupKind) [3]string {
	if gk.Group == "" {
		return [3]string{gk.Kind}
	}
	return [3]string{gk.Kind, ".", gk.Group}
}

// byteAt returns the i-th byte of the parts joined.
func byteAt(parts [3]string, i int) byte {
	for _, p := range parts {
		if i < len(p) {
			return p[i]
		}
		i -= len(p)
	}
	panic("byteAt: index out of range")
}

// objectKey identifies an object by group, kind, namespace and name: how
// references that carry no UID (a Cluster's class, a ClusterClass's
// templates, a binding's cluster) find their object.
type objectKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

func (k objectKey) String() string {
	return ObjectRef{GVK: k.gk.WithVersion(""), Namespace: k.namespace, Name: k.name}.String()
}

// ownerRef is one metadata.ownerReferences entry: the owner's UID, name and
// group and kind (the version does not matter to ownership). The group and
// kind are interned: every object of a fleet names one of a few owner kinds.
type ownerRef struct {
	uid  types.UID
	gk   schema.GroupKind
	name string
}

func (o ownerRef) groupKind() schema.GroupKind { return o.gk }

// facts is what the rules need to know about one object: all that is kept of
// it once read, so that the graph stays small however large the objects are.
// The booleans sit together so that they share one word: a graph holds
// tens of thousands of facts.
type facts struct {
	owners         []ownerRef
	moveLabel      bool
	hierarchyLabel bool
	blockMove      bool
	deleting       bool
	finalizers     bool
	// paused is only for Clusters and ClusterClasses.
	paused bool
	// resourceVersion is the version read, so that a write planned from
	// these facts can insist on finding the object as it was.
	resourceVersion string
	pausedBy        string

	// refs is nil but for the few kinds whose spec the rules read.
	refs *specFacts
}

// specFacts are the facts only Clusters, ClusterClasses and
// ClusterResourceSetBindings have. They are held apart so that the other
// objects, nearly all of a fleet, do not carry room for them.
type specFacts struct {
	// labels of a Cluster, for the cluster selector.
	labels map[string]string
	// classRef is the ClusterClass a Cluster's topology uses.
	classRef *objectKey
	// templateRefs are the templates a ClusterClass references.
	templateRefs []objectKey
	// bindingCluster is the Cluster a ClusterResourceSetBinding binds.
	bindingCluster string
}

// noSpecFacts stands for the spec facts of the kinds that have none.
var noSpecFacts = &specFacts{}

// spec returns the spec facts of an object; empty for the kinds that have
// none.
func (f *facts) spec() *specFacts {
	if f.refs == nil {
		return noSpecFacts
	}
	return f.refs
}

// factsOf reads the facts the rules need from an object. Spec fields are read
// only from unstructured objects of the kinds that need them (discovery reads
// every other kind as metadata only), at either the v1beta2 or the v1beta1
// field paths, so that the rules hold whichever is the storage version.
// Strings that repeat across objects go through intern.
func factsOf(obj client.Object, gk schema.GroupKind, intern func(string) string) facts {
	f := facts{}
	if refs := obj.GetOwnerReferences(); len(refs) > 0 {
		f.owners = make([]ownerRef, 0, len(refs))
		for _, ref := range refs {
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			f.owners = append(f.owners, ownerRef{
				uid:  ref.UID,
				gk:   schema.GroupKind{Group: intern(gv.Group), Kind: intern(ref.Kind)},
				name: ref.Name,
			})
		}
	}
	labels := obj.GetLabels()
	_, f.moveLabel = labels[MoveLabel]
	_, f.hierarchyLabel = labels[MoveHierarchyLabel]
	annotations := obj.GetAnnotations()
	_, f.blockMove = annotations[BlockMoveAnnotation]
	f.deleting = obj.GetDeletionTimestamp() != nil
	f.finalizers = len(obj.GetFinalizers()) > 0
	f.resourceVersion = obj.GetResourceVersion()
	f.pausedBy = annotations[movev1alpha1.PausedByAnnotation]
	_, pausedAnnotation := annotations[PausedAnnotation]

	u, _ := obj.(*unstructured.Unstructured)
	switch gk {
	case ClusterGroupKind:
		f.refs = &specFacts{labels: labels}
		f.paused = pausedAnnotation
		if u != nil {
			paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
			f.paused = f.paused || paused
			f.refs.classRef = clusterClassRef(u)
		}
	case ClusterClassGroupKind:
		f.paused = pausedAnnotation
		if u != nil {
			f.refs = &specFacts{templateRefs: templateRefs(u)}
		}
	case ClusterResourceSetBindingGroupKind:
		if u != nil {
			f.refs = &specFacts{}
			f.refs.bindingCluster, _, _ = unstructured.NestedString(u.Object, "spec", "clusterName")
		}
	}
	return f
}

// clusterClassRef returns the ClusterClass a Cluster's managed topology uses,
// or nil for a Cluster without one. An empty class namespace means the
// Cluster's own namespace.
func clusterClassRef(u *unstructured.Unstructured) *objectKey {
	// v1beta2: spec.topology.classRef.{name,namespace}.
	name, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "classRef", "name")
	namespace, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "classRef", "namespace")
	if name == "" {
		// v1beta1: spec.topology.{class,classNamespace}.
		name, _, _ = unstructured.NestedString(u.Object, "spec", "topology", "class")
		namespace, _, _ = unstructured.NestedString(u.Object, "spec", "topology", "classNamespace")
	}
	if name == "" {
		return nil
	}
	return &objectKey{gk: ClusterClassGroupKind, namespace: cmp.Or(namespace, u.GetNamespace()), name: name}
}

// templateRefFields are the fields under which a ClusterClass references its
// templates: templateRef in v1beta2, ref and remediationTemplate in v1beta1.
var templateRefFields = []string{"templateRef", "ref", "remediationTemplate"}

// templateRefs returns every template a ClusterClass references, wherever in
// its spec: walking the whole spec rather than a list of known paths keeps
// templates added by later API versions (remediation templates, machine
// pools) in the ClusterClass's hierarchy. Templates live in the ClusterClass's
// namespace.
func templateRefs(u *unstructured.Unstructured) []objectKey {
	var refs []objectKey
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, field := range templateRefFields {
				ref, ok := v[field].(map[string]any)
				if !ok {
					continue
				}
				apiVersion, _ := ref["apiVersion"].(string)
				kind, _ := ref["kind"].(string)
				name, _ := ref["name"].(string)
				if kind == "" || name == "" {
					continue
				}
				gv, _ := schema.ParseGroupVersion(apiVersion)
				refs = append(refs, objectKey{gk: schema.GroupKind{Group: gv.Group, Kind: kind}, namespace: u.GetNamespace(), name: name})
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(u.Object["spec"])
	return refs
}

// refOf returns the identity of an object read from a cluster.
func refOf(obj client.Object, gvk schema.GroupVersionKind) ObjectRef {
	return ObjectRef{GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// gvkOf returns the kind an object says it is, which for objects read by
// discovery is the storage version it was listed at.
func gvkOf(obj client.Object) (schema.GroupVersionKind, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return gvk, fmt.Errorf("object %s/%s has no apiVersion and kind", obj.GetNamespace(), obj.GetName())
	}
	return gvk, nil
}
