// Package planner builds a move's plan from its spec: it is the one place
// that reads spec.namespaces and spec.clusterSelector, and the one place
// that reads a source's objects into a graph and plans them by the graph's
// rules. Validating's checks, the plan Copying records, the look for GitOps
// managers, the creator's needs and the plan that stands in for a lost
// record all come from here, so that they can never disagree about what a
// move takes.
//
// It reads; it never writes, and it knows nothing of phases or of the
// target.
package planner

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// Selection is what a spec asks a move to take, parsed once.
type Selection struct {
	// Namespaces are spec.namespaces: the namespaces to move, each of which
	// the target must have afterwards, even one that holds nothing to move.
	// Empty means every namespace.
	Namespaces []string
	// Clusters is spec.clusterSelector: nil moves every Cluster of those
	// namespaces.
	Clusters labels.Selector
}

// SelectionError says that a spec's selection cannot be parsed, naming the
// field.
type SelectionError struct {
	Field string
	Err   error
}

func (e *SelectionError) Error() string {
	return fmt.Sprintf("%s is not a valid label selector: %v", e.Field, e.Err)
}

func (e *SelectionError) Unwrap() error { return e.Err }

// SelectionOf parses the selection of a MoveOperation's spec. An invalid
// spec.clusterSelector is a *SelectionError; the selection returned with
// it still names the namespaces, so that they can be checked too.
func SelectionOf(spec movev1alpha1.MoveOperationSpec) (Selection, error) {
	sel := Selection{Namespaces: NamespacesOf(spec)}
	if spec.ClusterSelector != nil {
		clusters, err := metav1.LabelSelectorAsSelector(spec.ClusterSelector)
		if err != nil {
			return sel, &SelectionError{Field: "spec.clusterSelector", Err: err}
		}
		sel.Clusters = clusters
	}
	return sel, nil
}

// NamespacesOf returns spec.namespaces: the namespaces a move takes, every
// one when empty. Whatever asks which namespaces a move concerns (the
// creator's rights included) asks here.
func NamespacesOf(spec movev1alpha1.MoveOperationSpec) []string { return spec.Namespaces }

// EveryNamespace reports whether the selection takes every namespace.
func (s Selection) EveryNamespace() bool { return len(s.Namespaces) == 0 }

// Source is where a plan's objects are read from: a cluster, read through
// a client that goes to its API server (never a cache: a move reads each
// object once), with the cache of its kinds kept between the phases that
// read them.
type Source struct {
	Reader client.Reader
	Types  *graph.TypesCache
}

// Kinds returns the kinds a move considers in the source, read again whole
// only when a CRD changed.
func (src Source) Kinds(ctx context.Context) (*graph.Types, error) {
	ts, err := src.types().Discover(ctx, src.Reader)
	if err != nil {
		return nil, fmt.Errorf("discovering the kinds to move: %w", err)
	}
	return ts, nil
}

func (src Source) types() *graph.TypesCache {
	if src.Types == nil {
		return &graph.TypesCache{}
	}
	return src.Types
}

// PageSize is the limit of the LIST requests that read a plan's objects
// (as metadata, but for the few kinds read whole). The graph keeps a few
// hundred bytes of each object; a page holds each whole, managed fields
// included, and the kinds are listed eight at a time, each with a page
// read ahead: at graph.DefaultPageSize (500) the pages took 12.5 MB, a
// third of a backup's live heap at its peak at N=1,000, next to the
// graph's 17 MB. At 100 they take a fifth of that, for one more LIST per
// 100 objects of a kind, against the writes a move or a backup makes for
// each object.
const PageSize = 100

// Read reads the graph of the objects the selection may take, with the
// given kinds (nil: the source's kinds now). The graph is not yet planned:
// see Plan, or graph.ChangesSince to hold it against a recorded plan.
func (src Source) Read(ctx context.Context, sel Selection, ts *graph.Types) (*graph.Graph, error) {
	if ts == nil {
		var err error
		if ts, err = src.Kinds(ctx); err != nil {
			return nil, err
		}
	}
	g, err := graph.Discover(ctx, src.Reader, ts, graph.DiscoverOptions{Namespaces: sel.Namespaces, PageSize: PageSize})
	if err != nil {
		return nil, fmt.Errorf("reading the objects to move: %w", err)
	}
	return g, nil
}

// Plan reads the source and plans the move of the selection by the graph's
// rules, with the given kinds (nil: the source's kinds now). The plan
// requires the selection's namespaces in the target, whether or not they
// hold anything that moves.
func (src Source) Plan(ctx context.Context, sel Selection, ts *graph.Types) (*graph.Plan, error) {
	g, err := src.Read(ctx, sel, ts)
	if err != nil {
		return nil, err
	}
	return Of(g, sel), nil
}

// Of plans the move of the selection over a graph already read.
func Of(g *graph.Graph, sel Selection) *graph.Plan {
	p := g.Plan(sel.Rules())
	p.RequireNamespaces(sel.Namespaces)
	return p
}

// Rules is the part of the selection the graph's rules apply, once the
// graph was read for its namespaces.
func (s Selection) Rules() graph.Selection {
	return graph.Selection{ClusterSelector: s.Clusters}
}
