package graph

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Labels and annotations clusterctl defines and that a move honours. They are
// spelled out here rather than imported so that the engine does not depend on
// the clusterctl module for a handful of strings; they are part of the
// clusterctl contract and do not change.
const (
	// ClusterctlLabel marks the CRDs whose objects a move considers.
	ClusterctlLabel = "clusterctl.cluster.x-k8s.io"
	// MoveLabel, on a CRD or an object, forces that object (every object of
	// that kind, for a CRD) to move even when nothing that moves owns it.
	MoveLabel = "clusterctl.cluster.x-k8s.io/move"
	// MoveHierarchyLabel, on a CRD or an object, makes the object a root
	// whose whole hierarchy (everything it owns, transitively) moves with it.
	MoveHierarchyLabel = "clusterctl.cluster.x-k8s.io/move-hierarchy"
	// BlockMoveAnnotation is set by providers on objects whose in-flight work
	// must not be interrupted by a move; a move waits until none carries it.
	BlockMoveAnnotation = "clusterctl.cluster.x-k8s.io/block-move"
	// DeleteForMoveAnnotation tells providers that an object is deleted
	// because it moved, so they must not tear down what it represents.
	DeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"
	// PausedAnnotation pauses reconciliation of a Cluster API object; it is
	// how a ClusterClass is paused (it has no spec.paused).
	PausedAnnotation = "cluster.x-k8s.io/paused"
	// ProviderLabel names, on what clusterctl installs (CRDs included), the
	// provider it belongs to, by clusterctl's manifest label of it:
	// "cluster-api", "bootstrap-kubeadm", "infrastructure-aws".
	ProviderLabel = "cluster.x-k8s.io/provider"
)

// Group kinds the rules single out.
var (
	ClusterGroupKind                   = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}
	ClusterClassGroupKind              = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "ClusterClass"}
	MachineGroupKind                   = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}
	ClusterResourceSetGroupKind        = schema.GroupKind{Group: "addons.cluster.x-k8s.io", Kind: "ClusterResourceSet"}
	ClusterResourceSetBindingGroupKind = schema.GroupKind{Group: "addons.cluster.x-k8s.io", Kind: "ClusterResourceSetBinding"}
	SecretGroupKind                    = schema.GroupKind{Kind: "Secret"}
	ConfigMapGroupKind                 = schema.GroupKind{Kind: "ConfigMap"}
)

// Type is one kind of object a move considers.
type Type struct {
	// GVK is the kind at its storage version: every read and write of objects
	// of this kind uses it, so no conversion webhook is ever called.
	GVK schema.GroupVersionKind
	// Resource is the plural resource name, for messages and RBAC.
	Resource string
	// Namespaced is false for cluster-scoped ("global") kinds, whose objects
	// are copied but never deleted from the source.
	Namespaced bool
	// Move is true when every object of this kind moves on its own (the CRD
	// carries the move label, or the kind is a hierarchy root).
	Move bool
	// MoveHierarchy is true when every object of this kind is a hierarchy
	// root: Cluster, ClusterClass, ClusterResourceSet, or a CRD labelled
	// move-hierarchy.
	MoveHierarchy bool
	// StoredVersions is the CRD's status.storedVersions (empty for core
	// kinds), for the preflight that refuses CRDs with objects still stored
	// at another version.
	StoredVersions []string
	// StatusSubresource is true when the kind's status is written through
	// its own subresource (at the storage version): a create then drops
	// the status it is given, and a move that carries status must write it
	// after. False for the core kinds that move, which have no status.
	StatusSubresource bool
	// Provider is the provider that installed the kind, as the CRD's
	// ProviderLabel names it ("bootstrap-kubeadm"); empty when unlabelled.
	Provider string
}

// Types is the set of kinds a move considers, indexed by group and kind.
type Types struct {
	byGroupKind map[schema.GroupKind]*Type
	list        []*Type
}

// CoreTypes are the built-in kinds clusterctl always considers.
func CoreTypes() []Type {
	return []Type{
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Resource: "configmaps", Namespaced: true},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: "secrets", Namespaced: true},
	}
}

// NewTypes indexes the given types. Cluster, ClusterClass and
// ClusterResourceSet are made hierarchy roots whatever their labels say, as
// clusterctl does; a root always moves.
func NewTypes(types ...Type) *Types {
	ts := &Types{byGroupKind: map[schema.GroupKind]*Type{}}
	for _, t := range types {
		switch t.GVK.GroupKind() {
		case ClusterGroupKind, ClusterClassGroupKind, ClusterResourceSetGroupKind:
			t.MoveHierarchy = true
		}
		if t.MoveHierarchy {
			t.Move = true
		}
		t := t
		ts.byGroupKind[t.GVK.GroupKind()] = &t
	}
	for _, t := range ts.byGroupKind {
		ts.list = append(ts.list, t)
	}
	slices.SortFunc(ts.list, func(a, b *Type) int {
		return strings.Compare(KindString(a.GVK.GroupKind()), KindString(b.GVK.GroupKind()))
	})
	return ts
}

// TypesFromCRDs returns the types of the given CRDs (the caller lists those
// labelled clusterctl.cluster.x-k8s.io), plus Secret and ConfigMap. A CRD
// without exactly one storage version is an error: there would be no single
// version to read and write its objects at.
func TypesFromCRDs(crds []apiextensionsv1.CustomResourceDefinition) (*Types, error) {
	types := CoreTypes()
	for i := range crds {
		crd := &crds[i]
		var storage []string
		statusSubresource := false
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				storage = append(storage, v.Name)
				statusSubresource = v.Subresources != nil && v.Subresources.Status != nil
			}
		}
		if len(storage) != 1 {
			return nil, fmt.Errorf("CRD %s declares %d storage versions, want exactly one", crd.Name, len(storage))
		}
		_, move := crd.Labels[MoveLabel]
		_, hierarchy := crd.Labels[MoveHierarchyLabel]
		types = append(types, Type{
			GVK:               schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage[0], Kind: crd.Spec.Names.Kind},
			Resource:          crd.Spec.Names.Plural,
			Namespaced:        crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			Move:              move,
			MoveHierarchy:     hierarchy,
			StoredVersions:    slices.Clone(crd.Status.StoredVersions),
			StatusSubresource: statusSubresource,
			Provider:          crd.Labels[ProviderLabel],
		})
	}
	return NewTypes(types...), nil
}

// Lookup returns the type of a group and kind, whatever version a reference
// to it names.
func (ts *Types) Lookup(gk schema.GroupKind) (*Type, bool) {
	t, ok := ts.byGroupKind[gk]
	return t, ok
}

// All returns every type, sorted by kind string for a deterministic order.
func (ts *Types) All() []*Type { return ts.list }

// KindString is how a kind is named in plans and messages: "Kind.group", or
// "Kind" for the core group, as kubectl names resources.
func KindString(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}
