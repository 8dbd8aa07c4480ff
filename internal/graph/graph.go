package graph

import (
	"fmt"
	"slices"
	"strings"
	"unique"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterSecretPurposes are the suffixes of the Secrets Cluster API writes
// for a Cluster, named "<cluster>-<purpose>". A Secret so named without any
// ownerReference (user-provided certificates, for example) belongs to its
// Cluster by that convention alone.
var clusterSecretPurposes = []string{"kubeconfig", "ca", "etcd", "sa", "proxy", "apiserver-etcd-client"}

// Graph holds the objects of the kinds a move considers, and the ownership
// between them. Build it with New and Add (or Discover), then call Plan.
type Graph struct {
	types *Types
	// namespaces is the scope of the move; nil means every namespace.
	namespaces map[string]bool
	// listedAll and listedIn record which kinds were listed in which
	// namespaces beyond the scope, so that an owner reference to an object
	// that should have been seen but was not is known to be dangling.
	listedAll map[schema.GroupKind]bool
	listedIn  map[schema.GroupKind]map[string]bool

	nodes map[types.UID]*node
	// warnings found while reading the objects, for the plan.
	warnings []string
	// linkWarnings are found by link, and replaced on every link.
	linkWarnings []string
}

// node is one object of the graph. Its fields are ordered so that it fits
// a smaller allocation size class: a graph holds one per object of the fleet.
type node struct {
	ref ObjectRef
	// namesake, on a virtual node, is the object read with the owner's kind,
	// namespace and name but another UID: the reference names an object
	// that was deleted and created again.
	namesake *node
	typ      *Type
	facts

	// Computed by link from the facts of every node.
	owners     []*node // hard owners, in ownerReference order
	softOwners []*node // owners by naming convention or by reference
	children   []*node // hard and soft dependents
	tenants    []*node // hierarchy roots whose hierarchy holds this node
	// mark is scratch for one computation, zero between them: a walk's
	// stamp (linkTenants), or the node's position in a list (groups), so
	// that walks over a fleet index slices instead of maps keyed by node.
	mark int32
	// observed is false for a virtual node: an owner known only from an
	// ownerReference, whose object was not read.
	observed bool
	// decided is what the selection of one plan computation decided of the
	// node, cleared by the link that starts the next: flags on the node,
	// not sets keyed by node, since nearly every node of a fleet is in
	// them and a set of them was a few megabytes at a backup's peak.
	decided decisions
}

func (n *node) global() bool { return n.observed && n.typ != nil && !n.typ.Namespaced }

func (n *node) isRoot() bool {
	return n.observed && n.typ != nil && (n.typ.MoveHierarchy || n.hierarchyLabel)
}

func (n *node) isCluster() bool { return n.ref.GroupKind() == ClusterGroupKind }

// New returns an empty graph for a move of the given namespaces (none means
// every namespace) over the given types.
func New(ts *Types, namespaces []string) *Graph {
	g := &Graph{
		types:     ts,
		listedAll: map[schema.GroupKind]bool{},
		listedIn:  map[schema.GroupKind]map[string]bool{},
		nodes:     map[types.UID]*node{},
	}
	if len(namespaces) > 0 {
		g.namespaces = map[string]bool{}
		for _, ns := range namespaces {
			g.namespaces[ns] = true
		}
	}
	return g
}

// Types returns the kinds the graph considers.
func (g *Graph) Types() *Types { return g.types }

// Namespaces returns the namespaces the move is scoped to, sorted; nil means
// every namespace.
func (g *Graph) Namespaces() []string {
	if g.namespaces == nil {
		return nil
	}
	ns := make([]string, 0, len(g.namespaces))
	for n := range g.namespaces {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// Len returns how many objects the graph holds (not counting owners known
// only by reference).
func (g *Graph) Len() int {
	n := 0
	for _, nd := range g.nodes {
		if nd.observed {
			n++
		}
	}
	return n
}

// Add records an object of a known kind: its identity (at the kind's storage
// version), its owner references and the labels, annotations and spec
// fields the rules read. Nothing else of the object is kept. Adding an object
// again replaces what was recorded.
func (g *Graph) Add(obj client.Object) error {
	gvk, err := gvkOf(obj)
	if err != nil {
		return err
	}
	typ, ok := g.types.Lookup(gvk.GroupKind())
	if !ok {
		return fmt.Errorf("adding %s %s/%s to the move graph: not a kind that moves", KindString(gvk.GroupKind()), obj.GetNamespace(), obj.GetName())
	}
	if obj.GetUID() == "" {
		return fmt.Errorf("adding %s %s/%s to the move graph: object has no UID", KindString(gvk.GroupKind()), obj.GetNamespace(), obj.GetName())
	}
	ref := refOf(obj, typ.GVK)
	ref.Namespace = intern(ref.Namespace)
	n := &node{
		ref:      ref,
		observed: true,
		typ:      typ,
		facts:    factsOf(obj, typ.GVK.GroupKind(), intern),
	}
	// An owner read already lends its own UID and name to the reference,
	// as link would: the copies decoded with the dependent are dropped
	// now, not once the whole fleet is read (they were an eighth of the
	// graph by then).
	for i, o := range n.facts.owners {
		if owner, read := g.nodes[o.uid]; read && owner.observed {
			n.facts.owners[i].uid, n.facts.owners[i].name = owner.ref.UID, owner.ref.Name
		}
	}
	g.nodes[obj.GetUID()] = n
	return nil
}

// intern returns the canonical copy of s (package unique), so that a
// string every object repeats (a namespace, a kind) is held once.
func intern(s string) string { return unique.Make(s).Value() }

// MarkListed records that every object of a kind in a namespace ("" for
// every namespace) was read, beyond the move's own namespaces, so that an
// owner reference into it that matches no object is known to be dangling.
func (g *Graph) MarkListed(gk schema.GroupKind, namespace string) {
	if namespace == "" {
		g.listedAll[gk] = true
		return
	}
	if g.listedIn[gk] == nil {
		g.listedIn[gk] = map[string]bool{}
	}
	g.listedIn[gk][namespace] = true
}

func (g *Graph) linkWarn(format string, args ...any) {
	g.linkWarnings = append(g.linkWarnings, fmt.Sprintf(format, args...))
}

// inScope reports whether an object is inside the namespaces being moved.
// Global objects are in every scope.
func (g *Graph) inScope(n *node) bool {
	return n.global() || g.namespaces == nil || g.namespaces[n.ref.Namespace]
}

// listed reports whether every object of a kind in a namespace was read.
func (g *Graph) listed(gk schema.GroupKind, namespace string) bool {
	typ, ok := g.types.Lookup(gk)
	if !ok {
		return false
	}
	if !typ.Namespaced || g.namespaces == nil || g.listedAll[gk] {
		return true
	}
	return g.namespaces[namespace] || g.listedIn[gk][namespace]
}

// sortedNodes returns every node in a deterministic order, so that plans,
// messages and warnings come out the same on every run.
func (g *Graph) sortedNodes() []*node {
	nodes := make([]*node, 0, len(g.nodes))
	for _, n := range g.nodes {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b *node) int { return compareRefs(a.ref, b.ref) })
	return nodes
}

// link computes the edges of the graph from the recorded facts: owner
// references (adding a virtual node for each owner that was not read), then
// soft ownership, then each node's hierarchy roots. It runs after every Add,
// so the order objects were read in never matters.
func (g *Graph) link() []*node {
	g.unlink()
	// Indexed before the virtual owners are added: only objects that were
	// read are found by kind, namespace and name.
	keyed := g.keyedKinds()
	byKey := map[objectKey]*node{}
	for _, n := range g.nodes {
		if keyed[n.ref.GroupKind()] {
			byKey[objectKey{gk: n.ref.GroupKind(), namespace: n.ref.Namespace, name: n.ref.Name}] = n
		}
	}
	g.linkOwnerReferences(byKey)
	nodes := g.sortedNodes()
	g.linkSoftOwners(nodes, byKey)
	for _, n := range nodes {
		for _, owner := range n.owners {
			owner.children = append(owner.children, n)
		}
		for _, owner := range n.softOwners {
			owner.children = append(owner.children, n)
		}
	}
	linkTenants(nodes)
	return nodes
}

// keyedKinds returns the kinds whose objects link looks up by kind,
// namespace and name: Clusters and ClusterClasses, the kinds ClusterClasses
// reference as templates, and the kinds of owners that were not read (to
// find an object of the owner's name). Indexing only those keeps the index
// to a few entries per workload cluster, not one per object.
func (g *Graph) keyedKinds() map[schema.GroupKind]bool {
	kinds := map[schema.GroupKind]bool{ClusterGroupKind: true, ClusterClassGroupKind: true}
	for _, n := range g.nodes {
		for _, key := range n.spec().templateRefs {
			kinds[key.gk] = true
		}
		for _, ref := range n.facts.owners {
			if _, read := g.nodes[ref.uid]; !read {
				kinds[ref.groupKind()] = true
			}
		}
	}
	return kinds
}

// unlink drops the virtual nodes, edges and warnings of a previous link.
func (g *Graph) unlink() {
	g.linkWarnings = nil
	for uid, n := range g.nodes {
		if !n.observed {
			delete(g.nodes, uid)
			continue
		}
		n.owners, n.softOwners, n.children, n.tenants, n.mark, n.decided = nil, nil, nil, nil, 0, 0
	}
}

// linkOwnerReferences sets every observed node's hard owners, adding a
// virtual node for each owner that was not read. The owner of a namespaced
// object is in the same namespace unless its kind is cluster-scoped.
func (g *Graph) linkOwnerReferences(byKey map[objectKey]*node) {
	observed := make([]*node, 0, len(g.nodes))
	for _, n := range g.nodes {
		observed = append(observed, n)
	}
	for _, n := range observed {
		for i, ref := range n.facts.owners {
			owner, ok := g.nodes[ref.uid]
			if !ok {
				owner = g.addVirtualOwner(n, ref, byKey)
			}
			// The reference's UID and name are the owner's own, in another
			// copy decoded with every dependent: holding the owner's copy
			// frees them.
			n.facts.owners[i].uid, n.facts.owners[i].name = owner.ref.UID, owner.ref.Name
			if !slices.Contains(n.owners, owner) {
				n.owners = append(n.owners, owner)
			}
		}
	}
}

// addVirtualOwner records an owner known only from n's ownerReference ref,
// and the object read under the same name, if any, as its namesake.
func (g *Graph) addVirtualOwner(n *node, ref ownerRef, byKey map[objectKey]*node) *node {
	gk := ref.groupKind()
	namespace := n.ref.Namespace
	gvk := gk.WithVersion("")
	if typ, known := g.types.Lookup(gk); known {
		gvk = typ.GVK
		if !typ.Namespaced {
			namespace = ""
		}
	}
	owner := &node{ref: ObjectRef{GVK: gvk, Namespace: namespace, Name: ref.name, UID: ref.uid}}
	owner.namesake = byKey[objectKey{gk: gk, namespace: namespace, name: ref.name}]
	g.nodes[ref.uid] = owner
	return owner
}

// linkSoftOwners sets the owners that are not in ownerReferences: by Cluster
// API's naming convention for Secrets, and by reference for Clusters,
// ClusterResourceSetBindings and ClusterClasses' templates.
func (g *Graph) linkSoftOwners(nodes []*node, byKey map[objectKey]*node) {
	for _, n := range nodes {
		if !n.observed {
			continue
		}
		switch n.ref.GroupKind() {
		case SecretGroupKind:
			linkClusterSecret(n, byKey)
		case ClusterGroupKind:
			if n.spec().classRef == nil {
				continue
			}
			if class, ok := byKey[*n.spec().classRef]; ok {
				addSoftOwner(n, class)
			} else {
				g.linkWarn("%s uses %s, which does not exist", n.ref, n.spec().classRef)
			}
		case ClusterResourceSetBindingGroupKind:
			if n.spec().bindingCluster == "" {
				continue
			}
			if cluster, ok := byKey[objectKey{gk: ClusterGroupKind, namespace: n.ref.Namespace, name: n.spec().bindingCluster}]; ok {
				addSoftOwner(n, cluster)
			}
		case ClusterClassGroupKind:
			g.linkClusterClassTemplates(n, byKey)
		}
	}
}

func addSoftOwner(n, owner *node) {
	if n != owner && !slices.Contains(n.softOwners, owner) {
		n.softOwners = append(n.softOwners, owner)
	}
}

// linkClusterSecret makes a Secret named "<cluster>-<purpose>" belong to that
// Cluster. A Secret with an owner reference belongs to its owner; only
// user-provided Secrets need the naming convention.
func linkClusterSecret(n *node, byKey map[objectKey]*node) {
	if len(n.facts.owners) > 0 {
		return
	}
	for _, purpose := range clusterSecretPurposes {
		// Match whole suffixes against Clusters that exist, so that
		// "<cluster>-apiserver-etcd-client" is never read as a
		// "client" Secret of a Cluster "<cluster>-apiserver-etcd".
		clusterName, ok := strings.CutSuffix(n.ref.Name, "-"+purpose)
		if !ok || clusterName == "" {
			continue
		}
		if cluster, ok := byKey[objectKey{gk: ClusterGroupKind, namespace: n.ref.Namespace, name: clusterName}]; ok {
			addSoftOwner(n, cluster)
		}
	}
}

// linkClusterClassTemplates makes a ClusterClass's templates its dependents:
// a ClusterClass needs its templates wherever they are, so they move with it
// even when the ClusterClass controller has not (yet) made itself their
// owner.
func (g *Graph) linkClusterClassTemplates(class *node, byKey map[objectKey]*node) {
	for _, key := range class.spec().templateRefs {
		if template, ok := byKey[key]; ok {
			addSoftOwner(template, class)
		} else if _, known := g.types.Lookup(key.gk); !known {
			g.linkWarn("%s references %s, which is not a kind that moves", class.ref, key)
		} else if g.listed(key.gk, key.namespace) {
			g.linkWarn("%s references %s, which does not exist", class.ref, key)
		}
	}
}

// linkTenants records each root's hierarchy on its members: everything
// reachable from the root through its dependents. The stamp stops the walk
// on ownership cycles, which the API server does not reject.
func linkTenants(nodes []*node) {
	var stamp int32
	for _, root := range nodes {
		if !root.isRoot() {
			continue
		}
		stamp++
		stack := []*node{root}
		root.mark = stamp
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			n.tenants = append(n.tenants, root)
			for _, child := range n.children {
				if child.mark != stamp {
					child.mark = stamp
					stack = append(stack, child)
				}
			}
		}
	}
	for _, n := range nodes {
		n.mark = 0
	}
}
