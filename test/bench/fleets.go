package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/testenv"
)

// The movers, by the names the report uses.
const (
	toolClusterctl = "clusterctl"
	// toolOperator moves with spec.objectStatusPolicy left to its default, Rebuild.
	toolOperator = "operator"
	// toolOperatorCarry is the same operator moving a fleet of its own with
	// spec.objectStatusPolicy Carry (-carry): one more write per moved object that has
	// a status, measured against toolOperator's move in the same
	// repetition.
	toolOperatorCarry = "operator, Carry"
	toolBaseline      = "baseline"
	// toolParity is the baseline's plain parallel requests plus the writes
	// a faithful move must make per object besides its create and delete:
	// the restore of the source's managed fields, the status where the
	// operator's move of the same run carries it (with -carry, every
	// status), and the finalizer removal before each DELETE. Against it,
	// the operator's copy+delete shows the operator's own overhead, not the
	// work any mover as faithful has to do.
	toolParity = "parity floor"
)

// namespacePrefix names each mover's namespace; all have the same length so
// the fleets' objects have the same sizes.
var namespacePrefix = map[string]string{toolClusterctl: "ctl", toolOperator: "opr", toolOperatorCarry: "opc", toolBaseline: "raw", toolParity: "par"}

// fileTag is a mover's name as the files of its moves (profiles) carry it,
// without the report name's commas and spaces: "operator-carry",
// "parity-floor".
func fileTag(tool string) string {
	return strings.ToLower(strings.NewReplacer(", ", "-", " ", "-").Replace(tool))
}

// benchFleet is one of a repetition's identical fleets and the mover that
// moves it.
type benchFleet struct {
	tool string
	// namespace holds the fleet's workload clusters; the move relocates it.
	namespace string
	// classNamespace holds the ClusterClass that a third of the clusters
	// use from another namespace. Both tools copy it and leave it in the
	// source (it is outside the namespace moved), so does the baseline.
	classNamespace string
	fleet          *fleet.Fleet
}

// fleetOptions is the fleet of the issue: N workload clusters with 3
// control-plane and 3 worker Machines each, the full fixture object set.
func fleetOptions(n int, namespace string) fleet.Options {
	return fleet.Options{
		Clusters:             n,
		Workers:              ptr.To(3),
		ControlPlaneReplicas: 3,
		Namespaces:           []string{namespace},
		Name:                 namespace,
	}
}

// fleetAttempts bounds the tries at creating one fleet. The fixture's
// writes go through the real admission webhooks, and the Cluster webhook
// gives up when reading the ClusterClass takes more than 2 s, which happens
// on 2 busy cores; a failed fleet is left where it is and built again in a
// fresh namespace.
const fleetAttempts = 3

// moveOrder is the order in which repetition rep (from 1) moves the
// movers' fleets. A repetition moves them one after the other on the same
// pair of clusters, so each finds the API servers holding a different
// amount: the source still holds the fleets not moved yet, the target those
// moved before. The order rotates by one place per repetition (clusterctl,
// operator, baseline; then operator, baseline, clusterctl; ...), so that
// over as many repetitions as movers each mover has every place once and
// none carries another's fleet in every repetition. baselineFirst keeps the
// baseline first and rotates the others. The operator's Carry move, when it
// runs, follows its Rebuild move in the rotation: with only those two, they
// swap places every repetition, so that over two repetitions each moves
// first once. The parity floor, when it runs, comes last in the rotation
// (after the baseline), and rotates with the others even with
// baselineFirst: it is the floor the operator is judged against, so it
// must meet the clusters in every state the operator meets them.
func moveOrder(rep int, m movers) []string {
	var rotating []string
	if m.clusterctl {
		rotating = append(rotating, toolClusterctl)
	}
	rotating = append(rotating, toolOperator)
	if m.carry {
		rotating = append(rotating, toolOperatorCarry)
	}
	if m.baseline && !m.baselineFirst {
		rotating = append(rotating, toolBaseline)
	}
	if m.parity {
		rotating = append(rotating, toolParity)
	}
	shift := (rep - 1) % len(rotating)
	order := append(append([]string{}, rotating[shift:]...), rotating[:shift]...)
	if m.baseline && m.baselineFirst {
		order = append([]string{toolBaseline}, order...)
	}
	return order
}

// movers says which movers a repetition runs, and where the baseline goes.
type movers struct {
	clusterctl, baseline bool
	// carry adds the operator's move with spec.objectStatusPolicy Carry.
	carry bool
	// parity adds the parity floor (toolParity).
	parity bool
	// baselineFirst moves the baseline's fleet before the others in every
	// repetition, while the source still holds every fleet, instead of
	// rotating it with them.
	baselineFirst bool
}

// createFleets creates, in the source, one fleet per mover with identical
// options but for the namespace and name prefix, and returns them in the
// order they are to be moved (moveOrder). The fleets are created one after
// the other: in parallel they overload the API server.
func (c *clusters) createFleets(ctx context.Context, n, rep int, m movers) ([]benchFleet, error) {
	tools := moveOrder(rep, m)
	fleets := make([]benchFleet, len(tools))
	began := time.Now()
	for i, tool := range tools {
		var err error
		if fleets[i], err = c.createFleet(ctx, tool, n, rep); err != nil {
			return nil, err
		}
	}
	// " then ", not a comma: "operator, Carry" has one.
	say("  %d fleets of %d objects each in %s; order: %s", len(fleets), fleets[0].fleet.Total(),
		time.Since(began).Round(time.Second), strings.Join(tools, " then "))
	return fleets, nil
}

func (c *clusters) createFleet(ctx context.Context, tool string, n, rep int) (benchFleet, error) {
	var errs []error
	for attempt := range fleetAttempts {
		// Every attempt's namespace has the same length, so every fleet's
		// objects have the same sizes.
		ns := fmt.Sprintf("%s-n%d-r%d%c", namespacePrefix[tool], n, rep, 'a'+attempt)
		create := func() (*fleet.Fleet, error) { return fleet.Create(ctx, c.env.Source.Client, fleetOptions(n, ns)) }
		if c.env.InMemory != nil {
			create = func() (*fleet.Fleet, error) { return c.createDevFleet(ctx, n, ns) }
		}
		f, err := create()
		if err == nil {
			return benchFleet{tool: tool, namespace: ns, classNamespace: ns + "-classes", fleet: f}, nil
		}
		if ctx.Err() != nil {
			return benchFleet{}, err
		}
		left := "left as it is"
		if c.env.InMemory != nil {
			left = "deleted"
		}
		say("  creating the %s fleet in namespace %s failed, %s: %v", tool, ns, left, err)
		errs = append(errs, err)
	}
	return benchFleet{}, fmt.Errorf("creating the %s fleet failed %d times: %w", tool, fleetAttempts, errors.Join(errs...))
}

// kindCounts are the objects of the move's kinds in one namespace, by kind.
type kindCounts map[string]int

func (k kindCounts) total() int {
	n := 0
	for _, v := range k {
		n += v
	}
	return n
}

// diff describes how got differs from want, kind by kind; empty when equal.
func (k kindCounts) diff(want kindCounts) string {
	kinds := map[string]bool{}
	for kind := range k {
		kinds[kind] = true
	}
	for kind := range want {
		kinds[kind] = true
	}
	var out []string
	for kind := range kinds {
		if k[kind] != want[kind] {
			out = append(out, fmt.Sprintf("%s %d (want %d)", kind, k[kind], want[kind]))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// count reads, metadata only, how many objects of each moved kind a
// namespace of m holds.
func (c *clusters) count(ctx context.Context, m *testenv.Management, namespace string) (kindCounts, error) {
	out := kindCounts{}
	for _, gvk := range c.namespaced {
		token := ""
		for {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := m.Client.List(ctx, list, client.InNamespace(namespace), client.Limit(500), client.Continue(token)); err != nil {
				return nil, fmt.Errorf("listing %s in namespace %s of %s: %w", gvk.Kind, namespace, m.Name, err)
			}
			if len(list.Items) > 0 {
				out[gvk.Kind] += len(list.Items)
			}
			if token = list.Continue; token == "" {
				break
			}
		}
	}
	return out, nil
}

// placement is what the fleet's two namespaces hold in both clusters.
type placement struct {
	source, target, sourceClasses, targetClasses kindCounts
}

// place counts the fleet's namespaces in both clusters.
func (c *clusters) place(ctx context.Context, f benchFleet) (*placement, error) {
	p := &placement{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, q := range []struct {
		m   *testenv.Management
		ns  string
		dst *kindCounts
	}{
		{c.env.Source, f.namespace, &p.source},
		{c.env.Target, f.namespace, &p.target},
		{c.env.Source, f.classNamespace, &p.sourceClasses},
		{c.env.Target, f.classNamespace, &p.targetClasses},
	} {
		g.Go(func() error {
			k, err := c.count(gctx, q.m, q.ns)
			mu.Lock()
			*q.dst = k
			mu.Unlock()
			return err
		})
	}
	return p, g.Wait()
}

// verifyMoved fails unless the move really happened: the target namespace
// holds every object the source namespace held, the source namespace holds
// none, and the ClusterClass namespace was copied and left in the source.
func verifyMoved(before, after *placement) error {
	var problems []string
	if before.source.total() == 0 {
		problems = append(problems, "the source namespace was empty before the move")
	}
	if before.target.total() != 0 {
		problems = append(problems, fmt.Sprintf("the target namespace held %d objects before the move", before.target.total()))
	}
	if d := after.target.diff(before.source); d != "" {
		problems = append(problems, "the target namespace holds "+d)
	}
	if n := after.source.total(); n != 0 {
		problems = append(problems, fmt.Sprintf("the source namespace still holds %d objects: %s", n, after.source.diff(kindCounts{})))
	}
	if d := after.targetClasses.diff(before.sourceClasses); d != "" {
		problems = append(problems, "the target's ClusterClass namespace holds "+d)
	}
	if d := after.sourceClasses.diff(before.sourceClasses); d != "" {
		problems = append(problems, "the source's ClusterClass namespace now holds "+d)
	}
	if len(problems) > 0 {
		return fmt.Errorf("the move did not happen as it should: %s", strings.Join(problems, "; "))
	}
	return nil
}
