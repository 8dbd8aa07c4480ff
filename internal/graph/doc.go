// Package graph decides what a move takes and in which order: it discovers
// the types to move (the CRDs clusterctl labels, plus Secrets and ConfigMaps,
// each at its storage version), builds the graph of their objects with every
// ownership rule clusterctl v1.14 applies, selects the objects a MoveOperation
// moves, and turns them into a Plan of creation groups.
//
// The rules, as Graph.Plan applies them:
//   - edges: ownerReferences; soft ownership of the Secrets
//     "<cluster>-{kubeconfig,ca,etcd,sa,proxy,apiserver-etcd-client}" that
//     have no ownerReference by their Cluster, of a Cluster by its
//     ClusterClass (in any namespace), of a ClusterResourceSetBinding by its
//     Cluster, and of the templates a ClusterClass references by it;
//   - roots: Cluster, ClusterClass, ClusterResourceSet, and any object whose
//     CRD or which itself carries the move-hierarchy label; a root moves with
//     everything below it; the move label moves a single object;
//   - selection: the Clusters in the namespaces moved (all when none are
//     given) that match the cluster selector, with their hierarchies, and the
//     other roots they use (their ClusterClass, wherever it lives, and the
//     ClusterResourceSets bound to them); global roots always move;
//   - order: an object is created after all its owners and soft owners; the
//     members of an ownership cycle share a group; deletion is the reverse;
//   - what stays in the source (copied, not deleted): global objects and
//     their hierarchies, objects outside the moved namespaces, and anything
//     something that stays still needs (a ClusterClass used by a Cluster that
//     does not move keeps its templates with it).
//
// The rules are pure functions of the objects added to a Graph, so they are
// unit-tested on hand-built objects; only discover.go talks to an API server,
// and it only reads. The package never writes to a cluster, never holds whole
// objects once it has read what the rules need from them (a move of thousands
// of objects must fit in a small operator), and never imports the controller.
//
// Where this package differs from clusterctl on purpose:
//   - an object that would move but whose owner does not is never silently
//     left out: the Plan lists it with its reason, and Plan.Validate fails;
//   - ownership cycles and self-ownership are placed in one group instead of
//     being dropped, their owner references linked once the group exists;
//   - the API version used for every read and write is the storage version
//     of the object's type, never one taken from a reference;
//   - Clusters can be selected by label, moving only their hierarchies, with
//     shared objects copied but left in place for the Clusters that stay.
package graph
