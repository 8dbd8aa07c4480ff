// Package graph decides what a move takes and in which order: it discovers
// the types to move (the CRDs clusterctl labels, plus Secrets and ConfigMaps,
// each at its storage version), builds the graph of their objects with every
// ownership rule clusterctl v1.14 applies, selects the objects a MoveOperation
// moves, and turns them into a Plan of creation groups.
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
