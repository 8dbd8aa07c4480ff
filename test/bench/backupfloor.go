package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/archive"
)

// The restore's floors: what the cluster restored into costs for the
// writes of a restore, whoever makes them. After the repetition's
// restores, the objects of the operator's archive are created again in
// that cluster by plain code, under namespaces of their own (the cluster
// holds the restored ones), with the operator's concurrency, QPS and
// burst, and the providers' admission webhooks removed (outside the
// timing) as the operator's bypass lets its own requests past them:
//
//   - floorCreates: one create per object, nothing else (no owner
//     references, no status, no managed fields, no records): what plain
//     concurrent creates of the same objects cost;
//   - floorFaithful: each create followed by the writes a faithful restore
//     cannot fold into it, the status through the status subresource
//     where the kind has one and the source's managed fields
//     (parityWrites, as the move's parity floor makes them).
//
// Neither reads, plans, records or orders anything: the operator's
// restore cannot be faster than the second, and what separates the two is
// the price of carrying statuses and managed fields.
const (
	floorCreates  = "plain creates"
	floorFaithful = "creates, statuses, managed fields"
)

// restoreFloor is one floor measured at n.
type restoreFloor struct {
	n, rep  int
	kind    string
	objects int
	writes  int64
	wall    time.Duration
}

// measureFloors measures both floors with the objects of the operator's
// archive at location. A floor that fails is reported, not fatal: the
// restores it is set beside were measured and checked.
func (r *backupRun) measureFloors(ctx context.Context, c *clusters, location string, n, rep int) {
	if err := r.floors(ctx, c, location, n, rep); err != nil {
		say("  the restore's floors: %v (not measured)", err)
	}
}

func (r *backupRun) floors(ctx context.Context, c *clusters, location string, n, rep int) error {
	objs, err := r.archivedObjects(location)
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(c.env.Target.Config)
	cfg.QPS, cfg.Burst = float32(r.b.opts.qps), r.b.opts.burst
	tgt, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating a client for the target: %w", err)
	}
	saved, err := removeWebhooks(ctx, c.env.Target)
	if saved != nil {
		defer func() {
			if err := saved.restore(ctx); err != nil {
				say("  putting the target's webhooks back after the floors: %v", err)
			}
		}()
	}
	if err != nil {
		return err
	}
	parity := &parityWrites{carry: true, statusSubresource: c.statusSubresource}
	for i, kind := range []string{floorCreates, floorFaithful} {
		fl := &restoreFloor{n: n, rep: rep, kind: kind}
		if err := r.floor(ctx, tgt, objs, fmt.Sprintf("-floor%d-%d", rep, i+1), kind == floorFaithful, parity, fl); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		r.floorResults = append(r.floorResults, fl)
		say("  floor: %-34s %6d objects %6d writes  %7s", kind, fl.objects, fl.writes, seconds(fl.wall))
	}
	return nil
}

// archivedObjects reads every namespaced object of the operator's archive.
func (r *backupRun) archivedObjects(location string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(filepath.Join(r.archives, location))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	a, err := archive.Open(f, info.Size(), r.key)
	if err != nil {
		return nil, fmt.Errorf("reading the operator's archive %s: %w", location, err)
	}
	var out []*unstructured.Unstructured
	for obj, err := range a.All() {
		if err != nil {
			return nil, err
		}
		if obj.GetNamespace() != "" {
			out = append(out, obj)
		}
	}
	return out, nil
}

// floor creates objs in the target, each in its namespace with suffix
// appended, timed from the first namespace created to the last write.
func (r *backupRun) floor(ctx context.Context, tgt client.Client, objs []*unstructured.Unstructured, suffix string, faithful bool, parity *parityWrites, fl *restoreFloor) error {
	began := time.Now()
	namespaces := map[string]bool{}
	for _, o := range objs {
		namespaces[o.GetNamespace()+suffix] = true
	}
	for ns := range namespaces {
		if err := tgt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	var writes atomic.Int64
	noUIDs := func(types.UID) (types.UID, bool) { return "", false }
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, r.b.opts.concurrency))
	for _, o := range objs {
		g.Go(func() error {
			cp := o.DeepCopy()
			cp.SetNamespace(o.GetNamespace() + suffix)
			for _, field := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "ownerReferences", "generateName"} {
				unstructured.RemoveNestedField(cp.Object, "metadata", field)
			}
			if err := tgt.Create(gctx, cp); err != nil {
				return fmt.Errorf("creating %s %s/%s: %w", cp.GetKind(), cp.GetNamespace(), cp.GetName(), err)
			}
			writes.Add(1)
			if !faithful {
				return nil
			}
			src := o.DeepCopy()
			src.SetNamespace(cp.GetNamespace())
			if parity.statusToWrite(src.DeepCopy(), cp.GetGeneration(), noUIDs) != nil {
				writes.Add(1)
			}
			if len(src.GetManagedFields()) > 0 {
				writes.Add(1)
			}
			return parity.finish(gctx, tgt, src, cp, noUIDs)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	fl.wall, fl.objects, fl.writes = time.Since(began), len(objs), writes.Load()
	return nil
}

// floorTable sets the floors beside the restores of the same repetition.
func (r *backupReport) floorTable() table {
	t := table{
		title:  "The restore's floors: the same objects written by plain code, in the same cluster, in the same run",
		header: []string{"N", "writer", "s", "objects", "writes", "writes per s", "its time / clusterctl's restore"},
		note: "After each repetition's restores, the namespaced objects of the operator's archive are created again in the cluster restored into, " +
			"under namespaces of their own, by plain code with the operator's concurrency, QPS and burst, the providers' admission webhooks removed " +
			"as the operator's bypass lets its own requests past them: once with one create per object and nothing else (no owner references, " +
			"no status, no managed fields, no reads, no records), once with each create followed by the writes a faithful restore cannot fold " +
			"into it (the status through the status subresource, then the source's managed fields). The operator's row is its restore's Copying " +
			"phase, which makes those writes and records its copies. Neither floor plans, reads or orders anything: what the API server takes " +
			"for these writes is the least a restore that carries statuses and managed fields can take.",
	}
	for _, n := range r.sizes() {
		ctl := medianArchive(r.of(n, toolClusterctl, opRestore), wallSeconds)
		vs := func(s float64) string {
			if ctl <= 0 {
				return ""
			}
			return fmt.Sprintf("%.2f×", s/ctl)
		}
		for _, op := range r.of(n, toolOperator, opRestore) {
			for _, p := range op.phases {
				if p.phase == "Copying" {
					t.rows = append(t.rows, []string{thousands(n), "operator (Copying)", fmt.Sprintf("%.1f", p.duration.Seconds()), fmt.Sprint(op.objects), "", "", vs(p.duration.Seconds())})
				}
			}
		}
		for _, fl := range r.floors {
			if fl.n != n {
				continue
			}
			s := fl.wall.Seconds()
			t.rows = append(t.rows, []string{thousands(n), "floor: " + fl.kind, fmt.Sprintf("%.1f", s), fmt.Sprint(fl.objects), fmt.Sprint(fl.writes),
				fmt.Sprintf("%.0f", float64(fl.writes)/s), vs(s)})
		}
	}
	if len(r.floors) == 0 {
		t.rows = nil
	}
	return t
}
