//go:build cluster

package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/snapshot"
)

// testFleet is a fleet created for one test, with what the test needs to
// tell its objects from other tests' in the shared clusters.
type testFleet struct {
	*fleet.Fleet
	prefix string
}

// createFleet creates a fleet of n workload clusters (every shape, hence
// every kind of the fixture) in two namespaces of the source, and removes
// everything it made from both clusters when the test ends.
func createFleet(t *testing.T, ctx context.Context, n int) *testFleet {
	t.Helper()
	prefix := "m" + rand.String(5)
	opts := fleet.Options{Clusters: n, Workers: ptr.To(1), Namespaces: []string{prefix + "-a", prefix + "-b"}, Name: prefix}
	f, err := fleet.Create(ctx, env.Source.Client, opts)
	if err != nil {
		t.Fatalf("creating the fleet: %v", err)
	}
	tf := &testFleet{Fleet: f, prefix: prefix}
	t.Cleanup(func() { tf.remove(t) })
	t.Logf("fleet of %d clusters, %d objects, in %s", len(f.Clusters), f.Total(), f.Namespaces)
	return tf
}

// remove deletes the fleet's objects from both clusters, finalizers first
// (no controller runs to remove them), then its namespaces.
func (f *testFleet) remove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cfg := range []*rest.Config{env.Source.Config, env.Target.Config} {
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Errorf("cleaning up: %v", err)
			return
		}
		kinds, err := graph.DiscoverTypes(ctx, c)
		if err != nil {
			t.Errorf("cleaning up: %v", err)
			return
		}
		for _, typ := range kinds.All() {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(typ.GVK.GroupVersion().WithKind(typ.GVK.Kind + "List"))
			if err := c.List(ctx, list); err != nil {
				t.Errorf("cleaning up: listing %s: %v", typ.GVK.Kind, err)
				continue
			}
			for i := range list.Items {
				o := &list.Items[i]
				if !f.owns(o.Namespace, o.Name) {
					continue
				}
				o.SetGroupVersionKind(typ.GVK)
				_ = c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
				_ = c.Delete(ctx, o)
			}
		}
		for _, ns := range f.Namespaces {
			if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleaning up namespace %s: %v", ns, err)
			}
		}
	}
}

// owns reports whether an object belongs to this fleet: it is in one of its
// namespaces, or it is cluster-scoped or in the provider namespace and
// named after the fleet.
func (f *testFleet) owns(namespace, name string) bool {
	if slices.Contains(f.Namespaces, namespace) {
		return true
	}
	return (namespace == "" || namespace == fleet.ProviderNamespace) && strings.HasPrefix(name, f.prefix)
}

// snapshot captures the fleet's objects in a cluster.
func (f *testFleet) snapshot(t *testing.T, ctx context.Context, c client.Reader) *snapshot.Snapshot {
	t.Helper()
	return f.take(t, ctx, c, snapshot.Options{UpdateManagers: true})
}

// take captures the fleet's objects in a cluster with the given options,
// in the fleet's namespaces.
func (f *testFleet) take(t *testing.T, ctx context.Context, c client.Reader, opts snapshot.Options) *snapshot.Snapshot {
	t.Helper()
	opts.Namespaces = f.Namespaces
	s, err := snapshot.Take(ctx, c, opts)
	if err != nil {
		t.Fatalf("taking a snapshot: %v", err)
	}
	mine := &snapshot.Snapshot{}
	for _, o := range s.Objects {
		if f.owns(o.Namespace, o.Name) {
			mine.Objects = append(mine.Objects, o)
		}
	}
	return mine
}

// mover runs the engine the way the controller's phases do, minus the
// scale-down of the providers (their webhooks stay up and check every write).
type mover struct {
	t              *testing.T
	source, target client.Client
	namespaces     []string
	selector       labels.Selector
	op             string
}

func newMover(t *testing.T, namespaces []string, selector labels.Selector) *mover {
	source, target := clients(t)
	return &mover{t: t, source: source, target: target, namespaces: namespaces, selector: selector, op: operation()}
}

func (m *mover) plan(ctx context.Context) *graph.Plan {
	return plan(m.t, ctx, m.source, m.namespaces, graph.Selection{ClusterSelector: m.selector})
}

// prepare validates, pauses, waits for block-move, and returns the plan
// read after the pause, as Copying records it.
func (m *mover) prepare(ctx context.Context) *graph.Plan {
	t := m.t
	t.Helper()
	p := m.plan(ctx)
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v\n%s", err, p)
	}
	if err := move.CheckProvisioned(ctx, m.source, p); err != nil {
		t.Fatalf("CheckProvisioned: %v", err)
	}
	if others := p.PausedByOthers(m.op); len(others) > 0 {
		t.Fatalf("paused by others: %v", others)
	}
	if err := move.Pause(ctx, m.source, p, m.op, move.Options{}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	waitForBlockMove(ctx, t, m.source, p)
	after := m.plan(ctx)
	if appeared, vanished := p.Changes(after); len(appeared)+len(vanished) > 0 {
		t.Fatalf("the moved set changed with the pause: %v appeared, %v vanished", appeared, vanished)
	}
	return after
}

func (m *mover) copy(ctx context.Context, p *graph.Plan, target client.Client) error {
	return copyAll(m.t, ctx, newCopier(m.source, target, p, m.op), p)
}

// delete deletes every group in reverse order.
func (m *mover) delete(ctx context.Context, p *graph.Plan, source client.Client) error {
	for i := len(p.Groups) - 1; i >= 0; i-- {
		if _, err := move.DeleteGroup(ctx, source, p, i, move.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// restore unpauses both clusters, target first.
func (m *mover) restore(ctx context.Context, kinds *graph.Types) {
	t := m.t
	t.Helper()
	for _, c := range []client.Client{m.target, m.source} {
		if _, err := move.Unpause(ctx, c, kinds, m.op, move.Options{}); err != nil {
			t.Fatalf("Unpause: %v", err)
		}
	}
}

// checkOwnerReferences fails for every owner reference of the fleet's
// objects in a cluster that points at no object there.
func checkOwnerReferences(t *testing.T, ctx context.Context, c client.Client, f *testFleet, kinds *graph.Types) {
	t.Helper()
	type identity struct{ kind, name string }
	byUID := map[types.UID]identity{}
	var objs []metav1.PartialObjectMetadata
	for _, typ := range kinds.All() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(typ.GVK.GroupVersion().WithKind(typ.GVK.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			t.Fatalf("listing %s: %v", typ.GVK.Kind, err)
		}
		for _, o := range list.Items {
			byUID[o.UID] = identity{typ.GVK.Kind, o.Name}
			if f.owns(o.Namespace, o.Name) {
				o.Kind = typ.GVK.Kind
				objs = append(objs, o)
			}
		}
	}
	for _, o := range objs {
		for _, ref := range o.OwnerReferences {
			if got, ok := byUID[ref.UID]; !ok || got != (identity{ref.Kind, ref.Name}) {
				t.Errorf("%s %s/%s: ownerReference to %s %s (uid %s) points at no such object", o.Kind, o.Namespace, o.Name, ref.Kind, ref.Name, ref.UID)
			}
		}
	}
	if len(objs) == 0 {
		t.Errorf("no objects of the fleet found to check")
	}
}

// globalsOnly fails unless the fleet left in the source only its global
// objects: the identity and, in the provider namespace, its credentials.
func globalsOnly(t *testing.T, s *snapshot.Snapshot, f *testFleet) {
	t.Helper()
	var left []string
	for _, o := range s.Objects {
		if o.Namespace != "" && o.Namespace != fleet.ProviderNamespace {
			left = append(left, o.Key().String())
		}
	}
	if len(left) > 0 {
		t.Errorf("%d namespaced objects of the fleet are still in the source, want none: %v", len(left), left)
	}
	if _, ok := s.Get(snapshot.Key{Kind: "LoopClusterIdentity.infrastructure.cluster.x-k8s.io", Name: f.Identities[0]}); !ok {
		t.Errorf("the global identity %s is gone from the source", f.Identities[0])
	}
}

func TestMoveCopiesThenDeletesAFleet(t *testing.T) {
	ctx := testContext(t)
	f := createFleet(t, ctx, 3)
	m := newMover(t, f.Namespaces, nil)
	before := f.snapshot(t, ctx, m.source)

	p := m.prepare(ctx)
	kinds := map[string]bool{}
	for _, k := range p.Kinds() {
		kinds[k.Kind] = true
	}
	for kind := range before.Kinds() {
		if !kinds[kind] {
			t.Errorf("the plan moves no %s, which the fleet holds:\n%s", kind, p)
		}
	}
	began := time.Now()
	if err := m.copy(ctx, p, m.target); err != nil {
		t.Fatalf("copying: %v", err)
	}
	copied := time.Since(began)
	if err := m.delete(ctx, p, m.source); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	t.Logf("moved %d objects in %d groups: copy %s, delete %s", p.Len(), len(p.Groups), copied.Round(time.Millisecond), (time.Since(began) - copied).Round(time.Millisecond))
	m.restore(ctx, p.Types())

	t.Run("the target holds exactly what the source held", func(t *testing.T) {
		if d := snapshot.Diff(before, f.snapshot(t, ctx, m.target)); d != "" {
			t.Errorf("the target differs from the source before the move (-source +target):\n%s", d)
		}
	})
	t.Run("every ownerReference in the target points at an object of the target", func(t *testing.T) {
		checkOwnerReferences(t, ctx, m.target, f, p.Types())
	})
	t.Run("only global objects remain in the source", func(t *testing.T) {
		globalsOnly(t, f.snapshot(t, ctx, m.source), f)
	})
	t.Run("nothing is left paused", func(t *testing.T) {
		for _, c := range []client.Client{m.source, m.target} {
			if n, err := move.Unpause(ctx, c, p.Types(), m.op, move.Options{}); err != nil || n > 0 {
				t.Errorf("%d objects still paused by the move (%v)", n, err)
			}
		}
	})
}

// failAfter wraps a client so that its k+1-th call of the given kind
// ("create", "delete", "patch/status") fails,
// as if the operator had crashed there: every call after it fails too.
func failAfter(c client.Client, k int32, verb string) client.Client {
	var calls atomic.Int32
	crash := func() error {
		if calls.Add(1) > k {
			return errors.New("injected crash")
		}
		return nil
	}
	funcs := interceptor.Funcs{}
	switch verb {
	case "create":
		funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := crash(); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		}
	case "delete":
		funcs.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := crash(); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		}
	case "patch/status":
		funcs.SubResourcePatch = func(ctx context.Context, c client.Client, subResource string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if subResource == "status" {
				if err := crash(); err != nil {
					return err
				}
			}
			return c.SubResource(subResource).Patch(ctx, obj, patch, opts...)
		}
	}
	return interceptor.NewClient(c.(client.WithWatch), funcs)
}

func TestAnInterruptedMoveResumesToTheSameResult(t *testing.T) {
	ctx := testContext(t)
	f := createFleet(t, ctx, 3)
	m := newMover(t, f.Namespaces, nil)
	before := f.snapshot(t, ctx, m.source)
	p := m.prepare(ctx)
	total := int32(p.Len())

	// Each attempt stops after k creates, in an earlier group, in the middle
	// of one, and just before the end; the copy that resumes is a new Copier
	// that knows nothing of the attempts, as after a restart.
	for _, k := range []int32{3, total / 2, total - 2} {
		err := m.copy(ctx, p, failAfter(watchable(t, env.Target.Config), k, "create"))
		if !errorContains(err, "injected crash") {
			t.Fatalf("the copy interrupted after %d creates returned %v", k, err)
		}
	}
	if err := m.copy(ctx, p, m.target); err != nil {
		t.Fatalf("resuming the copy: %v", err)
	}

	// The deletion is interrupted too, and resumed from the same plan, as
	// a restarted operator reads it back from its record: what is gone
	// already counts as deleted.
	if err := m.delete(ctx, p, failAfter(watchable(t, env.Source.Config), total/3, "delete")); !errorContains(err, "injected crash") {
		t.Fatalf("the deletion interrupted after %d deletes returned %v", total/3, err)
	}
	if err := m.delete(ctx, graph.NewPlan(p.Groups), m.source); err != nil {
		t.Fatalf("resuming the deletion: %v", err)
	}
	m.restore(ctx, p.Types())

	if d := snapshot.Diff(before, f.snapshot(t, ctx, m.target)); d != "" {
		t.Errorf("the target differs from the source before the move (-source +target):\n%s", d)
	}
	checkOwnerReferences(t, ctx, m.target, f, p.Types())
	globalsOnly(t, f.snapshot(t, ctx, m.source), f)
}

// watchable returns a client that can be wrapped by an interceptor.
func watchable(t *testing.T, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAConflictingObjectInTheTargetIsReportedAndRolledBackAround(t *testing.T) {
	ctx := testContext(t)
	f := createFleet(t, ctx, 3)
	m := newMover(t, f.Namespaces, nil)
	sourceBefore := f.snapshot(t, ctx, m.source)
	p := m.prepare(ctx)

	// Somebody already has a Machine of the same name in the target.
	victim := p.OfKind(graph.MachineGroupKind)[0]
	if err := move.EnsureNamespace(ctx, m.target, victim.Namespace); err != nil {
		t.Fatal(err)
	}
	machine, err := get(ctx, m.source, victim.GVK, victim.Namespace, victim.Name)
	if err != nil {
		t.Fatal(err)
	}
	theirs := &unstructured.Unstructured{Object: map[string]any{"apiVersion": machine.GetAPIVersion(), "kind": machine.GetKind(), "spec": machine.Object["spec"]}}
	theirs.SetNamespace(victim.Namespace)
	theirs.SetName(victim.Name)
	create(t, ctx, m.target, theirs)

	err = m.copy(ctx, p, m.target)
	var conflict *move.ConflictError
	if !errors.As(err, &conflict) || conflict.Object.Name != victim.Name {
		t.Fatalf("copying: %v, want a ConflictError on %s", err, victim.ObjectRef)
	}
	if want := fmt.Sprintf("Machine.cluster.x-k8s.io %s/%s already exists in the target and was not created by this move", victim.Namespace, victim.Name); !errorContains(err, want) {
		t.Errorf("error %q does not say %q", err, want)
	}

	if _, err := move.Rollback(ctx, m.target, p.Types(), p, m.op, copiesOf(m.op), move.Options{}); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	m.restore(ctx, p.Types())
	for _, o := range p.Objects() {
		if o.UID == victim.UID || o.Global || o.InGlobalHierarchy {
			continue
		}
		if _, err := get(ctx, m.target, o.GVK, o.Namespace, o.Name); !apierrors.IsNotFound(err) {
			t.Errorf("%s is left in the target after the rollback (%v)", o.ObjectRef, err)
		}
	}
	if _, err := get(ctx, m.target, victim.GVK, victim.Namespace, victim.Name); err != nil {
		t.Errorf("the rollback removed the conflicting Machine, which the move did not create: %v", err)
	}
	if d := snapshot.Diff(sourceBefore, f.snapshot(t, ctx, m.source)); d != "" {
		t.Errorf("the source changed (-before +after):\n%s", d)
	}
}

func TestAClusterSelectorMovesExactlyItsClusters(t *testing.T) {
	ctx := testContext(t)
	f := createFleet(t, ctx, 3)
	source, _ := clients(t)

	// Select the classic cluster and the one whose ClusterClass lives in
	// another namespace; leave the one using the ClusterClass of its own
	// namespace.
	selected := map[string]bool{}
	var left fleet.WorkloadCluster
	for _, wc := range f.Clusters {
		if wc.Shape == fleet.ClusterClass {
			left = wc
			continue
		}
		selected[wc.Name] = true
		patch := []byte(`{"metadata":{"labels":{"move-test/selected":"yes"}}}`)
		if err := source.Patch(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": map[string]any{"namespace": wc.Namespace, "name": wc.Name},
		}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("labelling Cluster %s: %v", wc.Name, err)
		}
	}
	// Only the workload clusters' namespaces move: the ClusterClass of the
	// other namespace comes along because a selected Cluster uses it.
	namespaces := f.Namespaces[:2]
	m := newMover(t, namespaces, labels.SelectorFromSet(labels.Set{"move-test/selected": "yes"}))
	before := f.snapshot(t, ctx, m.source)
	p := m.prepare(ctx)
	if err := m.copy(ctx, p, m.target); err != nil {
		t.Fatalf("copying: %v", err)
	}
	if err := m.delete(ctx, p, m.source); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	m.restore(ctx, p.Types())

	// What belongs to a selected Cluster moves; what belongs to the one left
	// stays; what they share (the global identity, the ClusterClass of the
	// other namespace, a ClusterResourceSet bound to both) is copied and
	// stays too.
	clusters := clustersOf(before)
	crsUse := map[string]map[bool]bool{} // namespace -> bound to a selected Cluster? -> true
	for _, o := range before.Objects {
		if o.Kind == "ClusterResourceSetBinding.addons.cluster.x-k8s.io" {
			if crsUse[o.Namespace] == nil {
				crsUse[o.Namespace] = map[bool]bool{}
			}
			crsUse[o.Namespace][selected[fmt.Sprint(o.Content["spec"].(map[string]any)["clusterName"])]] = true
		}
	}
	wantTarget, wantSource := &snapshot.Snapshot{}, &snapshot.Snapshot{}
	for _, o := range before.Objects {
		inTarget, inSource := true, true
		switch cs := clusters[o.Key()]; {
		case len(cs) > 0:
			inTarget, inSource = false, false
			for _, c := range cs {
				inTarget = inTarget || selected[c]
				inSource = inSource || !selected[c]
			}
		case o.Key() == (snapshot.Key{Kind: "ClusterClass.cluster.x-k8s.io", Namespace: left.ClassRef.Namespace, Name: left.ClassRef.Name}) ||
			(o.Namespace == left.ClassRef.Namespace && slices.ContainsFunc(o.Owners, func(ow snapshot.Owner) bool {
				return ow.Kind == "ClusterClass.cluster.x-k8s.io" && ow.Name == left.ClassRef.Name
			})):
			inTarget = false // used only by the Cluster left
		case o.Kind == "ClusterResourceSet.addons.cluster.x-k8s.io" || slices.ContainsFunc(o.Owners, func(ow snapshot.Owner) bool {
			return ow.Kind == "ClusterResourceSet.addons.cluster.x-k8s.io"
		}):
			inTarget, inSource = crsUse[o.Namespace][true], crsUse[o.Namespace][false]
		}
		if inTarget {
			wantTarget.Objects = append(wantTarget.Objects, o)
		}
		if inSource {
			wantSource.Objects = append(wantSource.Objects, o)
		}
	}
	if d := snapshot.Diff(wantTarget, f.snapshot(t, ctx, m.target)); d != "" {
		t.Errorf("the target holds other than the selected clusters and what they share (-want +got):\n%s", d)
	}
	if d := snapshot.Diff(wantSource, f.snapshot(t, ctx, m.source)); d != "" {
		t.Errorf("the source holds other than the cluster left and what is shared (-want +got):\n%s", d)
	}
	checkOwnerReferences(t, ctx, m.target, f, p.Types())
}

// clustersOf maps every object of a snapshot to the Clusters it belongs to:
// the Clusters reached through its owner references, or named by a binding.
func clustersOf(s *snapshot.Snapshot) map[snapshot.Key][]string {
	out := map[snapshot.Key][]string{}
	var walk func(o snapshot.Object, seen map[snapshot.Key]bool) []string
	walk = func(o snapshot.Object, seen map[snapshot.Key]bool) []string {
		if seen[o.Key()] {
			return nil
		}
		seen[o.Key()] = true
		switch o.Kind {
		case "Cluster.cluster.x-k8s.io":
			return []string{o.Name}
		case "ClusterResourceSetBinding.addons.cluster.x-k8s.io":
			return []string{fmt.Sprint(o.Content["spec"].(map[string]any)["clusterName"])}
		}
		var clusters []string
		for _, owner := range o.Owners {
			if parent, ok := s.Get(snapshot.Key{Kind: owner.Kind, Namespace: o.Namespace, Name: owner.Name}); ok {
				clusters = append(clusters, walk(parent, seen)...)
			}
		}
		return clusters
	}
	for _, o := range s.Objects {
		out[o.Key()] = walk(o, map[snapshot.Key]bool{})
	}
	return out
}

// copyRecords stands in for the record of the copies a MoveOperation keeps
// in the source (internal/planrecord): by operation, the target UIDs of the
// copies each group made, as the Copier reports them before it restores
// their managed fields.
var copyRecords sync.Map // operation -> *sync.Map of types.UID

// newCopier returns a Copier that records its copies, and knows the copies
// recorded by earlier Copiers of the same operation, as the controller's do.
func newCopier(source, target client.Client, p *graph.Plan, op string) *move.Copier {
	return move.NewCopier(source, target, p, op, move.Options{}).
		WithCopies(copiesOf(op)).
		OnCopied(func(_ context.Context, _ int, uids []types.UID) error {
			v, _ := copyRecords.LoadOrStore(op, &sync.Map{})
			for _, u := range uids {
				v.(*sync.Map).Store(u, true)
			}
			return nil
		})
}

// copiesOf returns the copies recorded for an operation.
func copiesOf(op string) map[types.UID]bool {
	out := map[types.UID]bool{}
	if v, ok := copyRecords.Load(op); ok {
		v.(*sync.Map).Range(func(k, _ any) bool {
			out[k.(types.UID)] = true
			return true
		})
	}
	return out
}

// waitForBlockMove waits, as the controller does between pausing and
// copying, until no object of the plan carries the block-move annotation.
func waitForBlockMove(ctx context.Context, t *testing.T, c client.Reader, p *graph.Plan) {
	t.Helper()
	var blockers []graph.ObjectRef
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		blockers, err = move.Blockers(ctx, c, p)
		return len(blockers) == 0, err
	})
	if err != nil {
		t.Fatalf("waiting for the %s annotation to go from %v: %v", graph.BlockMoveAnnotation, blockers, err)
	}
}
