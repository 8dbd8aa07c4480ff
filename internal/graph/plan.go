package graph

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Selection says which of the graph's objects a move takes, beyond the
// namespaces the graph was built for.
type Selection struct {
	// ClusterSelector, when not nil, moves only the Clusters in scope whose
	// labels match, with their hierarchies and the shared objects they need
	// (their ClusterClass and its templates, the ClusterResourceSets bound to
	// them). Shared objects still needed by Clusters that stay are copied
	// but not deleted. Nil moves every Cluster in scope.
	ClusterSelector labels.Selector
}

// Object is one object the move copies. A move holds one per object of the
// fleet from Validating to Done: the booleans sit together after the
// strings so that they share one word.
type Object struct {
	ObjectRef
	// Group is the index of the creation group the object belongs to: it is
	// created after every object it depends on, which are in earlier groups
	// (or, for members of an ownership cycle, in the same one).
	Group int
	// KeepReason says why Delete is false, for the plan and the logs.
	KeepReason string
	// Global is true for cluster-scoped objects.
	Global bool
	// InGlobalHierarchy is true for objects owned, directly or not, by a
	// global object that moves (a global identity's credentials Secret).
	// Like global objects, they may already exist in the target: a copy
	// found there is used as it is.
	InGlobalHierarchy bool
	// Delete is true when the object is deleted from the source once copied.
	// It is false for global objects, for the hierarchy of a global object,
	// for objects outside the moved namespaces, and for shared objects that
	// something staying in the source still needs.
	Delete bool
	// FoundInTarget is true for an object that was in the target already
	// when the move recorded its plan: a global object (or one of its
	// hierarchy) the target has, or the copy an earlier move made. It is
	// used as found, never written, and a rollback leaves it.
	FoundInTarget bool

	// What the object carried when it was read.

	// Paused is true for a Cluster (spec.paused or the paused annotation) or
	// ClusterClass (the paused annotation) that is paused.
	Paused bool
	// BlockMove is true while the object carries the block-move annotation.
	BlockMove bool
	// Deleting is true when the object has a deletionTimestamp.
	Deleting bool
	// Finalizers is true when the object had finalizers.
	Finalizers bool
	// PausedBy is the value of the paused-by annotation: the operation that
	// paused it, if one did.
	PausedBy string
	// ResourceVersion is the object's resourceVersion when it was read.
	ResourceVersion string
}

// ExclusionReason says why an object of the graph does not move.
type ExclusionReason string

const (
	// ExcludedNotInHierarchy: nothing that moves owns the object, and nothing
	// forces it to move. Most Secrets and ConfigMaps of a namespace are so.
	ExcludedNotInHierarchy ExclusionReason = "NotInHierarchy"
	// ExcludedNotSelected: the object is, or belongs to, a Cluster that the
	// cluster selector leaves out, or it is a shared object no selected
	// Cluster uses.
	ExcludedNotSelected ExclusionReason = "NotSelected"
	// ExcludedOwnerNotMoved: the object is in a hierarchy that moves, but one
	// of its owners does not move. clusterctl drops such objects silently
	// (and the source's garbage collector then deletes them with their
	// moved owner); a move refuses to start while any is left.
	ExcludedOwnerNotMoved ExclusionReason = "OwnerNotMoved"
	// ExcludedOwnerMissing: an owner reference of the object, or of an
	// object above it, names an owner that does not exist (deleted, or
	// deleted and created again with another UID), so no hierarchy holds
	// it. clusterctl leaves such objects behind without a word; a move
	// refuses to start while any is left, naming them, so that the user
	// removes them or repairs their owner references.
	ExcludedOwnerMissing ExclusionReason = "OwnerMissing"
)

// Exclusion is an object of the graph that the move does not take.
type Exclusion struct {
	ObjectRef
	Reason ExclusionReason
	// Message says why, naming the objects involved.
	Message string
	// Blocking is true when the move must not start while this object is
	// left behind: see Plan.Validate.
	Blocking bool
}

// Plan is what a move copies, in which order, and what it leaves behind.
// It is deterministic: the same objects always give the same plan.
type Plan struct {
	// Groups are the creation groups, in creation order; deletion goes in
	// the reverse order. Objects in a group are sorted by kind, namespace
	// and name, and can be created in parallel.
	Groups [][]*Object
	// Excluded lists every object in scope that does not move, with why.
	Excluded []Exclusion
	// Warnings are what the user should know that does not stop the move.
	Warnings []string

	types *Types
	byUID map[types.UID]*Object
	// required are namespaces the target must have even when no moved
	// object is in them (see RequireNamespaces).
	required []string
	// targetVersions are the versions the target stores kinds at, where
	// they are not the versions of the objects' GVKs (see
	// SetTargetVersions).
	targetVersions map[schema.GroupKind]string
}

// Plan selects the objects to move and orders them. See the package
// documentation for the rules.
func (g *Graph) Plan(sel Selection) *Plan {
	return g.selectMoved(sel).plan()
}

// selectMoved decides, by the rules, which objects of the graph move and
// which of those stay in the source as well.
func (g *Graph) selectMoved(sel Selection) *selector {
	s := newSelector(g, g.link(), sel)
	s.selectRoots()
	s.applyRules()
	s.block()
	s.keep()
	return s
}

// selector holds the state of one Plan computation. What it decides of
// nearly every node (used, moved by the rules, moved) is in the nodes'
// decisions; the sets below hold few nodes.
type selector struct {
	g     *Graph
	nodes []*node
	sel   Selection

	selectedClusters map[*node]bool // Clusters whose hierarchies move
	activeRoots      map[*node]bool // other roots whose hierarchies move
	blocked          map[*node]string
	kept             map[*node]string
	missingOwner     map[*node]string // why an object stays: an owner is missing
	warnings         []string
}

// decisions are what one selection decided of a node (node.decided).
type decisions uint8

const (
	// decidedUsed: the node is an ancestor of something a selected
	// Cluster's hierarchy holds, or in that hierarchy (selectRoots).
	decidedUsed decisions = 1 << iota
	// decidedRuleMove: the rules move it, before blocking (applyRules).
	decidedRuleMove
	// decidedMoved: it moves (block).
	decidedMoved
)

func newSelector(g *Graph, nodes []*node, sel Selection) *selector {
	return &selector{
		g: g, nodes: nodes, sel: sel,
		selectedClusters: map[*node]bool{},
		activeRoots:      map[*node]bool{},
		blocked:          map[*node]string{},
		kept:             map[*node]string{},
	}
}

// ruleMove reports whether the rules move n, before blocking.
func (s *selector) ruleMove(n *node) bool { return n.decided&decidedRuleMove != 0 }

// moved reports whether n moves.
func (s *selector) moved(n *node) bool { return n.decided&decidedMoved != 0 }

func (s *selector) warn(format string, args ...any) {
	s.warnings = append(s.warnings, fmt.Sprintf(format, args...))
}

// selectRoots decides which hierarchies move. A Cluster's moves when it is in
// scope and matches the selector. Any other root's (ClusterClass,
// ClusterResourceSet, objects labelled move-hierarchy) moves when it is
// global, or in scope and no selector narrows the move, or when it is an
// ancestor of something a selected Cluster's hierarchy holds: the ClusterClass
// a selected Cluster uses moves even from another namespace.
func (s *selector) selectRoots() {
	for _, n := range s.nodes {
		if n.observed && n.isCluster() && s.g.inScope(n) &&
			(s.sel.ClusterSelector == nil || s.sel.ClusterSelector.Matches(labels.Set(n.spec().labels))) {
			s.selectedClusters[n] = true
		}
	}

	// Ancestors of the selected Clusters' hierarchies.
	var stack []*node
	for _, n := range s.nodes {
		if s.anyTenant(n, s.selectedClusters) {
			n.decided |= decidedUsed
			stack = append(stack, n)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, owners := range [2][]*node{n.owners, n.softOwners} {
			for _, owner := range owners {
				if owner.observed && owner.decided&decidedUsed == 0 {
					owner.decided |= decidedUsed
					stack = append(stack, owner)
				}
			}
		}
	}

	for _, n := range s.nodes {
		if !n.isRoot() || n.isCluster() {
			continue
		}
		if n.global() || n.decided&decidedUsed != 0 || n.moveLabel || (s.sel.ClusterSelector == nil && s.g.inScope(n)) {
			s.activeRoots[n] = true
		}
	}
}

func (s *selector) anyTenant(n *node, set map[*node]bool) bool {
	for _, t := range n.tenants {
		if set[t] {
			return true
		}
	}
	return false
}

// inUnselectedCluster reports whether a node belongs to the hierarchy of a
// Cluster that does not move.
func (s *selector) inUnselectedCluster(n *node) bool {
	for _, t := range n.tenants {
		if t.isCluster() && !s.selectedClusters[t] {
			return true
		}
	}
	return false
}

// forced reports whether an object moves on its own, outside any hierarchy:
// the move label on the object or on its CRD.
func forced(n *node) bool {
	return n.observed && !n.isRoot() && (n.moveLabel || (n.typ != nil && n.typ.Move))
}

// belongsToHierarchy reports whether the rules would move an object if no
// namespace or selector narrowed the move.
func belongsToHierarchy(n *node) bool {
	return n.observed && (len(n.tenants) > 0 || forced(n))
}

// applyRules computes which objects the rules move, before blocking.
func (s *selector) applyRules() {
	for _, n := range s.nodes {
		var moves bool
		switch {
		case !n.observed:
		case n.isCluster():
			moves = s.selectedClusters[n]
		case s.anyTenant(n, s.selectedClusters):
			moves = true
		case s.inUnselectedCluster(n):
		case s.anyTenant(n, s.activeRoots):
			moves = true
		case forced(n) && s.g.inScope(n):
			moves = true
		}
		if moves {
			n.decided |= decidedRuleMove
		}
	}
}

// block finds the objects the rules would move but that cannot move because
// an owner does not: an owner of a kind that does not move, or an owner that
// nothing moves (not even without a selector). They stay in the source, and
// so does everything below them. An owner left out only by the namespace
// scope or the cluster selector does not block: the object is shared, copied
// without that owner and kept in the source. Global objects and objects
// outside the scope never block either: they are never deleted, so copying
// them without the owner loses nothing.
func (s *selector) block() {
	for changed := true; changed; {
		changed = false
		for _, n := range s.nodes {
			if !s.ruleMove(n) || s.blocked[n] != "" || n.global() || !s.g.inScope(n) {
				continue
			}
			if reason := s.blockReason(n); reason != "" {
				s.blocked[n] = reason
				changed = true
			}
		}
	}
	for _, n := range s.nodes {
		if s.ruleMove(n) && s.blocked[n] == "" {
			n.decided |= decidedMoved
		}
	}
}

func (s *selector) blockReason(n *node) string {
	for _, owner := range n.owners {
		switch {
		case !owner.observed:
			if _, known := s.g.types.Lookup(owner.ref.GroupKind()); !known {
				return fmt.Sprintf("its owner %s is of a kind that does not move", owner.ref)
			}
			if !s.g.listed(owner.ref.GroupKind(), owner.ref.Namespace) {
				return fmt.Sprintf("its owner %s was not read (outside the moved namespaces)", owner.ref)
			}
			// Dangling: the owner does not exist; the reference is dropped.
		case s.blocked[owner] != "":
			return fmt.Sprintf("its owner %s cannot move", owner.ref)
		case s.ruleMove(owner):
		case !belongsToHierarchy(owner):
			return fmt.Sprintf("its owner %s does not move: nothing that moves owns it (label it %s to move it)", owner.ref, MoveLabel)
		}
	}
	for _, owner := range n.softOwners {
		if s.blocked[owner] != "" {
			return fmt.Sprintf("%s, which it belongs to, cannot move", owner.ref)
		}
	}
	return ""
}

// keep decides which moved objects stay in the source as well (copied, not
// deleted): global objects and their hierarchies; objects outside the moved
// namespaces; objects something that stays still depends on, or that an
// owner that stays still owns; with a cluster selector, objects moved only
// because they are labelled to move, since Clusters that stay may reference
// them by name. Then, transitively, the owners of a kept object (deleting
// them would let the garbage collector delete it) and what a kept object
// owns or references, except what belongs to a moving Cluster's hierarchy
// (the templates of a kept ClusterClass stay with it, the Clusters that use
// it do not).
func (s *selector) keep() {
	var stack []*node
	for _, n := range s.nodes {
		if !s.moved(n) {
			continue
		}
		if reason := s.keepReason(n); reason != "" && s.markKept(n, reason) {
			stack = append(stack, n)
		}
	}
	s.spreadKept(stack)
}

// markKept records why n stays in the source, unless a reason is recorded
// already: the first reason found is the one the plan gives. It reports
// whether n was newly kept, so that the caller spreads the keeping from it
// once.
func (s *selector) markKept(n *node, reason string) bool {
	if s.kept[n] != "" {
		return false
	}
	s.kept[n] = reason
	return true
}

// keepReason says why the moved object n stays in the source because of
// what it is or what stays around it, or "" when nothing of itself keeps
// it. The reasons are tried in the order the plan prefers to give them.
func (s *selector) keepReason(n *node) string {
	switch {
	case n.global():
		return "it is cluster-scoped"
	case !s.g.inScope(n):
		return "it is outside the moved namespaces"
	}
	for _, t := range n.tenants {
		if t.global() && s.moved(t) {
			return fmt.Sprintf("it belongs to the cluster-scoped %s", t.ref)
		}
	}
	for _, child := range n.children {
		if child.observed && !s.moved(child) {
			return fmt.Sprintf("%s, which stays, depends on it", child.ref)
		}
	}
	for _, owner := range n.owners {
		if owner.observed && !s.moved(owner) {
			return fmt.Sprintf("its owner %s stays", owner.ref)
		}
	}
	if s.sel.ClusterSelector != nil && forced(n) && len(n.tenants) == 0 {
		return "it moves only because it is labelled to move, and Clusters that stay may use it"
	}
	return ""
}

// spreadKept keeps, from the kept objects on the stack outwards, the moved
// owners of a kept object (deleting them would let the garbage collector
// delete it) and what it owns or references, except what belongs to a
// moving Cluster's hierarchy.
func (s *selector) spreadKept(stack []*node) {
	movedClusters := map[*node]bool{}
	for _, n := range s.nodes {
		if s.moved(n) && n.isCluster() {
			movedClusters[n] = true
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, owners := range [2][]*node{n.owners, n.softOwners} {
			for _, owner := range owners {
				if s.moved(owner) && s.markKept(owner, fmt.Sprintf("%s, which stays, depends on it", n.ref)) {
					stack = append(stack, owner)
				}
			}
		}
		for _, child := range n.children {
			if s.moved(child) && !child.isCluster() && !s.anyTenant(child, movedClusters) &&
				s.markKept(child, fmt.Sprintf("it belongs to %s, which stays", n.ref)) {
				stack = append(stack, child)
			}
		}
	}
}

// groups orders the moved objects: an object comes after all its moved
// owners and soft owners. The members of an ownership cycle share a group,
// placed after every owner outside the cycle.
func (s *selector) groups() [][]*node {
	var moved []*node
	for _, n := range s.nodes {
		if s.moved(n) {
			moved = append(moved, n)
		}
	}
	// Each moved node's position in moved is its mark for the time of this
	// computation, so that the graph below is slices of positions: maps
	// keyed by node were most of what planning a fleet allocated.
	for i, n := range moved {
		n.mark = int32(i)
	}
	defer func() {
		for _, n := range moved {
			n.mark = 0
		}
	}()
	start, deps := s.dependencies(moved)
	component, components := stronglyConnected(start, deps)
	first, members := componentMembers(component, components)
	level := componentLevels(start, deps, component, first, members)

	var groups [][]*node
	for i, n := range moved {
		l := int(level[component[i]])
		for len(groups) <= l {
			groups = append(groups, nil)
		}
		groups[l] = append(groups[l], n)
	}
	// Nodes are already sorted, so every group is.
	return groups
}

// dependencies returns what each moved node depends on (its moved owners
// and soft owners), by position in moved: what moved[i] depends on is
// deps[start[i]:start[i+1]]. One flat slice, not a slice per node, keeps
// planning a fleet to a few allocations. The nodes' marks must be their
// positions.
func (s *selector) dependencies(moved []*node) (start, deps []int32) {
	start = make([]int32, len(moved)+1)
	deps = make([]int32, 0, len(moved))
	for i, n := range moved {
		for _, owners := range [][]*node{n.owners, n.softOwners} {
			for _, o := range owners {
				if s.moved(o) {
					deps = append(deps, o.mark)
				}
			}
		}
		start[i+1] = int32(len(deps))
	}
	return start, deps
}

// componentMembers lists the vertices of each strongly connected
// component, so that a component's dependencies are found from its
// members: the members of component c are members[first[c]:first[c+1]].
func componentMembers(component []int32, components int32) (first, members []int32) {
	first = make([]int32, components+1)
	for _, c := range component {
		first[c+1]++
	}
	for c := range components {
		first[c+1] += first[c]
	}
	members = make([]int32, len(component))
	next := slices.Clone(first[:components])
	for v, c := range component {
		members[next[c]] = int32(v)
		next[c]++
	}
	return first, members
}

// componentLevels returns the level of each strongly connected component:
// one more than the highest level of the components it depends on, so
// that a component's group comes after those of everything it depends on.
// A cycle's members share a component, so the dependencies inside it do
// not count.
func componentLevels(start, deps, component, first, members []int32) []int32 {
	level := make([]int32, len(first)-1)
	for c := range level {
		level[c] = -1
	}
	var levelOf func(c int32) int32
	levelOf = func(c int32) int32 {
		if level[c] >= 0 {
			return level[c]
		}
		var l int32
		for _, v := range members[first[c]:first[c+1]] {
			for _, d := range deps[start[v]:start[v+1]] {
				if component[d] != c {
					l = max(l, levelOf(component[d])+1)
				}
			}
		}
		level[c] = l
		return l
	}
	for c := range level {
		levelOf(int32(c))
	}
	return level
}

// stronglyConnected numbers the strongly connected components of the graph
// whose vertex v depends on deps[start[v]:start[v+1]] (Tarjan's algorithm),
// so that ownership cycles are found. It returns each vertex's component
// and how many there are.
func stronglyConnected(start, deps []int32) ([]int32, int32) {
	n := len(start) - 1
	index := make([]int32, n)
	for v := range index {
		index[v] = -1
	}
	low := make([]int32, n)
	onStack := make([]bool, n)
	component := make([]int32, n)
	var stack []int32
	var next, components int32
	var visit func(v int32)
	visit = func(v int32) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, d := range deps[start[v]:start[v+1]] {
			if index[d] < 0 {
				visit(d)
				low[v] = min(low[v], low[d])
			} else if onStack[d] {
				low[v] = min(low[v], index[d])
			}
		}
		if low[v] == index[v] {
			for {
				m := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[m] = false
				component[m] = components
				if m == v {
					break
				}
			}
			components++
		}
	}
	for v := range n {
		if index[v] < 0 {
			visit(int32(v))
		}
	}
	return component, components
}

func (s *selector) plan() *Plan {
	groups := s.groups()
	moved := 0
	for _, group := range groups {
		moved += len(group)
	}
	p := &Plan{types: s.g.types, byUID: make(map[types.UID]*Object, moved)}

	for i, group := range groups {
		objects := make([]*Object, 0, len(group))
		for _, n := range group {
			o := &Object{
				ObjectRef: n.ref,
				Group:     i,
				Global:    n.global(),
				InGlobalHierarchy: slices.ContainsFunc(n.tenants, func(t *node) bool {
					return t.global() && s.moved(t) && t != n
				}),
				Delete:          s.kept[n] == "",
				KeepReason:      s.kept[n],
				Paused:          n.paused,
				PausedBy:        n.pausedBy,
				BlockMove:       n.blockMove,
				Deleting:        n.deleting,
				Finalizers:      n.finalizers,
				ResourceVersion: n.resourceVersion,
			}
			objects = append(objects, o)
			p.byUID[n.ref.UID] = o
		}
		p.Groups = append(p.Groups, objects)
	}

	s.findMissingOwners()
	for _, n := range s.nodes {
		if !n.observed {
			continue
		}
		if s.moved(n) {
			s.objectWarnings(n)
			continue
		}
		if !s.g.inScope(n) {
			continue
		}
		p.Excluded = append(p.Excluded, s.exclusion(n))
	}

	p.Warnings = slices.Concat(s.g.warnings, s.g.linkWarnings, s.warnings)
	return p
}

func (s *selector) exclusion(n *node) Exclusion {
	e := Exclusion{ObjectRef: n.ref}
	switch {
	case s.blocked[n] != "":
		e.Reason, e.Message, e.Blocking = ExcludedOwnerNotMoved, s.blocked[n], true
	case n.isCluster():
		e.Reason, e.Message = ExcludedNotSelected, "the cluster selector does not match it"
	case s.inUnselectedCluster(n):
		for _, t := range n.tenants {
			if t.isCluster() && !s.selectedClusters[t] {
				e.Reason, e.Message = ExcludedNotSelected, fmt.Sprintf("it belongs to %s, which is not selected", t.ref)
				break
			}
		}
	case len(n.tenants) > 0:
		e.Reason, e.Message = ExcludedNotSelected, "no selected Cluster uses it"
	case s.missingOwner[n] != "":
		e.Reason, e.Message, e.Blocking = ExcludedOwnerMissing, s.missingOwner[n], true
	default:
		e.Reason, e.Message = ExcludedNotInHierarchy, "no Cluster, ClusterClass, ClusterResourceSet or move-hierarchy object owns it, and it is not labelled to move"
	}
	return e
}

// findMissingOwners finds the objects that no hierarchy holds because an
// owner reference names an owner that does not exist, and everything below
// them: each would stay in the source, unnoticed, while what it belonged to
// moves.
func (s *selector) findMissingOwners() {
	s.missingOwner = map[*node]string{}
	var stack []*node
	for _, n := range s.nodes {
		if !n.observed || s.moved(n) || len(n.tenants) > 0 || !s.g.inScope(n) {
			continue
		}
		for _, owner := range n.owners {
			if owner.observed || !s.g.listed(owner.ref.GroupKind(), owner.ref.Namespace) {
				continue
			}
			msg := fmt.Sprintf("its owner %s does not exist", owner.ref)
			if owner.namesake != nil {
				msg += fmt.Sprintf(" (%s exists with UID %s: the reference names an earlier object of that name)", owner.namesake.ref, owner.namesake.ref.UID)
			}
			s.missingOwner[n] = msg + "; remove the object, or point its ownerReference at the owner that exists"
			stack = append(stack, n)
			break
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, child := range n.children {
			if child.observed && !s.moved(child) && s.missingOwner[child] == "" && s.g.inScope(child) {
				s.missingOwner[child] = fmt.Sprintf("it belongs to %s, which stays behind: %s", n.ref, s.missingOwner[n])
				stack = append(stack, child)
			}
		}
	}
}

// objectWarnings records what the user should know about a moved object.
func (s *selector) objectWarnings(n *node) {
	if s.kept[n] != "" {
		s.warn("%s is copied but not deleted from the source: %s", n.ref, s.kept[n])
	}
	for _, owner := range n.owners {
		switch {
		case !owner.observed:
			s.warn("%s is copied without its ownerReference to %s: the owner does not exist", n.ref, owner.ref)
		case !s.moved(owner):
			s.warn("%s is copied without its ownerReference to %s, which does not move", n.ref, owner.ref)
		}
	}
	if n.deleting {
		s.warn("%s is being deleted in the source; its copy in the target will not be", n.ref)
	}
}

// Object returns the moved object with the given source UID.
func (p *Plan) Object(uid types.UID) (*Object, bool) {
	o, ok := p.byUID[uid]
	return o, ok
}

// Objects returns every moved object, in creation order.
func (p *Plan) Objects() []*Object {
	if p.Len() == 0 {
		return nil
	}
	out := make([]*Object, 0, p.Len())
	for _, g := range p.Groups {
		out = append(out, g...)
	}
	return out
}

// Len returns how many objects the move copies.
func (p *Plan) Len() int { return len(p.byUID) }

// Types returns the kinds the plan was built over.
func (p *Plan) Types() *Types { return p.types }

// OfKind returns the moved objects of the given kinds, in creation order.
func (p *Plan) OfKind(kinds ...schema.GroupKind) []*Object {
	var out []*Object
	for _, o := range p.Objects() {
		if slices.Contains(kinds, o.GroupKind()) {
			out = append(out, o)
		}
	}
	return out
}

// Namespaces returns the namespaces the target must have, sorted: those of
// the moved objects, and those required whether or not anything moves from
// them (see RequireNamespaces).
func (p *Plan) Namespaces() []string {
	seen := map[string]bool{}
	var out []string
	add := func(ns string) {
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	for _, o := range p.byUID {
		add(o.Namespace)
	}
	for _, ns := range p.required {
		add(ns)
	}
	slices.Sort(out)
	return out
}

// RequireNamespaces makes the namespaces part of what the move takes even
// when nothing in them moves: a namespace a move names exists in the
// target after it, so that a move back naming the same namespaces finds
// every one of them there.
func (p *Plan) RequireNamespaces(namespaces []string) {
	for _, ns := range namespaces {
		if !slices.Contains(p.required, ns) {
			p.required = append(p.required, ns)
		}
	}
	slices.Sort(p.required)
}

// RequiredNamespaces returns the namespaces RequireNamespaces added, sorted.
func (p *Plan) RequiredNamespaces() []string { return slices.Clone(p.required) }

// Validate fails when the move would leave behind objects of a hierarchy
// that moves because an owner does not move (see ExcludedOwnerNotMoved), and
// names each one with its reason.
func (p *Plan) Validate() error {
	var blocking []string
	for _, e := range p.Excluded {
		if e.Blocking {
			blocking = append(blocking, fmt.Sprintf("%s (%s)", e.ObjectRef, e.Message))
		}
	}
	if len(blocking) == 0 {
		return nil
	}
	return fmt.Errorf("%d objects cannot move because an owner does not move or does not exist: %s", len(blocking), joinLimited(blocking, 20))
}

// SetTargetVersions records, per kind, the version the target stores it
// at, for the kinds it stores at another version than the one the plan's
// objects are read at (their GVK): a move from an older Cluster API into a
// newer one, whose objects the move converts (package convert) and writes,
// reads and deletes in the target at the target's version only, since any
// other would have the target's API server call the conversion webhooks of
// the controllers the move stops. Kinds not named are stored at the same
// version in both clusters. Validating decides the versions once; the
// record of the plan keeps them.
func (p *Plan) SetTargetVersions(versions map[schema.GroupKind]string) {
	p.targetVersions = nil
	for gk, v := range versions {
		if p.targetVersions == nil {
			p.targetVersions = map[schema.GroupKind]string{}
		}
		p.targetVersions[gk] = v
	}
}

// TargetVersions returns what SetTargetVersions recorded: the kinds the
// target stores at another version than the plan reads them at, with that
// version.
func (p *Plan) TargetVersions() map[schema.GroupKind]string {
	out := make(map[schema.GroupKind]string, len(p.targetVersions))
	for gk, v := range p.targetVersions {
		out[gk] = v
	}
	return out
}

// TargetGVK returns the kind and version to read and write, in the
// target, an object of the plan read at gvk: the version the target stores
// its kind at.
func (p *Plan) TargetGVK(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	if v, ok := p.targetVersions[gvk.GroupKind()]; ok {
		gvk.Version = v
	}
	return gvk
}

// InTarget returns ref as the target names it: the same object at the
// version the target stores its kind at (TargetGVK). Its UID is still the
// source's.
func (p *Plan) InTarget(ref ObjectRef) ObjectRef {
	ref.GVK = p.TargetGVK(ref.GVK)
	return ref
}

// Converts reports whether the target stores the kind of an object read at
// gvk at another version: its objects are converted on their way.
func (p *Plan) Converts(gvk schema.GroupVersionKind) bool {
	return p.TargetGVK(gvk) != gvk
}

// NewPlan returns the plan of the given creation groups, as an earlier
// computation made them: a plan read back from where a move recorded it.
// It knows no kinds, exclusions or warnings.
func NewPlan(groups [][]*Object) *Plan {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	p := &Plan{Groups: groups, byUID: make(map[types.UID]*Object, n)}
	for _, g := range groups {
		for _, o := range g {
			p.byUID[o.UID] = o
		}
	}
	return p
}

// Changes returns what differs between the moved sets of two plans of the
// same source: the objects now moves that p does not (they appeared since
// p was made), and the objects of p that now does not move (gone, or no
// longer selected). Objects are told apart by UID, so an object deleted and
// created again under its name is in both lists.
func (p *Plan) Changes(now *Plan) (appeared, vanished []ObjectRef) {
	for _, o := range now.Objects() {
		if _, ok := p.byUID[o.UID]; !ok {
			appeared = append(appeared, o.ObjectRef)
		}
	}
	for _, o := range p.Objects() {
		if _, ok := now.byUID[o.UID]; !ok {
			vanished = append(vanished, o.ObjectRef)
		}
	}
	return appeared, vanished
}

// ChangesSince returns what p.Changes(g.Plan(sel)) returns, without
// building that plan: the objects sel moves in g that p does not, and the
// objects of p that sel does not move in g. A move checks the source against
// its recorded plan this way once everything is copied, while it holds the
// recorded plan: a second plan beside it was the largest part of a large
// move's memory.
func (g *Graph) ChangesSince(p *Plan, sel Selection) (appeared, vanished []ObjectRef) {
	s := g.selectMoved(sel)
	stillMoved := 0
	for _, n := range s.nodes {
		if !s.moved(n) {
			continue
		}
		if _, ok := p.byUID[n.ref.UID]; ok {
			stillMoved++
		} else {
			appeared = append(appeared, n.ref)
		}
	}
	// The graph holds one node per UID: when as many of p's objects move as
	// p has, none vanished, and the set below is not needed.
	if stillMoved == p.Len() {
		return appeared, nil
	}
	movedNow := make(map[types.UID]bool, len(s.nodes))
	for _, n := range s.nodes {
		if s.moved(n) {
			movedNow[n.ref.UID] = true
		}
	}
	for _, o := range p.Objects() {
		if !movedNow[o.UID] {
			vanished = append(vanished, o.ObjectRef)
		}
	}
	return appeared, vanished
}

// PausedByOthers returns the moved Clusters and ClusterClasses that are
// paused, but not by this operation.
func (p *Plan) PausedByOthers(operation string) []ObjectRef {
	var out []ObjectRef
	for _, o := range p.Objects() {
		if o.Paused && o.PausedBy != operation {
			out = append(out, o.ObjectRef)
		}
	}
	return out
}

// BlockingMove returns the moved objects that carried the block-move
// annotation when they were read.
func (p *Plan) BlockingMove() []ObjectRef {
	var out []ObjectRef
	for _, o := range p.Objects() {
		if o.BlockMove {
			out = append(out, o.ObjectRef)
		}
	}
	return out
}

// KindCount is how many objects of one kind the move copies.
type KindCount struct {
	Kind  string
	Count int
}

// Kinds counts the moved objects per kind, sorted by kind.
func (p *Plan) Kinds() []KindCount {
	// Counted by GroupKind, and named once per kind: naming every object's
	// kind would build a string per object of the fleet.
	counts := map[schema.GroupKind]int{}
	for _, o := range p.byUID {
		counts[o.GroupKind()]++
	}
	out := make([]KindCount, 0, len(counts))
	for gk, c := range counts {
		out = append(out, KindCount{Kind: KindString(gk), Count: c})
	}
	slices.SortFunc(out, func(a, b KindCount) int { return cmp.Compare(a.Kind, b.Kind) })
	return out
}

func joinLimited(items []string, limit int) string {
	if len(items) <= limit {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:limit], "; ") + fmt.Sprintf("; and %d more", len(items)-limit)
}
