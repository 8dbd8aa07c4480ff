//go:build cluster

package integration

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/snapshot"
)

var (
	machinePoolGVK     = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"}
	loopMachinePoolGVK = loopprovider.GroupVersion.WithKind(loopprovider.MachinePoolKind)
)

// workloadNodeUID is the UID of a Node of a workload cluster: it names
// something that does not move, and stays as it is in the copy.
const workloadNodeUID = "0d1c3a52-workload-node"

// TestCarryGivesEveryCopyItsSourceStatusWithMovedUIDsRewrittenAfterCrashesAtAnyStatusWrite
// copies a fleet with spec.objectStatusPolicy Carry, crashing the copy before the
// first, a middle and the last status write, each time resuming with a new
// Copier as a restarted operator does, and checks that every copy has its
// source's status, generations mapped to its own, and, where the status
// names a moved object by UID (here a MachinePool naming its
// LoopMachinePool, of a later group), that object's copy's UID; a UID of
// something that does not move stays. The copies' managed fields are the
// source's: the status writes leave no mark.
func TestCarryGivesEveryCopyItsSourceStatusWithMovedUIDsRewrittenAfterCrashesAtAnyStatusWrite(t *testing.T) {
	ctx := testContext(t)
	f := createFleet(t, ctx, 1)
	m := newMover(t, f.Namespaces, nil)
	pool, infra := namePoolsInfrastructureInItsStatus(t, ctx, m.source, f.Namespaces)
	before := f.snapshot(t, ctx, m.source)
	p := m.prepare(ctx)
	targetTypes, err := graph.DiscoverTypes(ctx, m.target)
	if err != nil {
		t.Fatalf("DiscoverTypes: %v", err)
	}
	carry := move.StatusSubresources(targetTypes)
	sources := map[types.UID]*unstructured.Unstructured{}
	for _, o := range p.Objects() {
		if !carry(o.GroupKind()) {
			continue
		}
		src, err := get(ctx, m.source, o.GVK, o.Namespace, o.Name)
		if err != nil {
			t.Fatalf("reading %s: %v", o.ObjectRef, err)
		}
		if status, _ := src.Object["status"].(map[string]any); len(status) > 0 {
			sources[o.UID] = src
		}
	}
	// A global object the target has already is used as found: it keeps
	// the target's status.
	found, foundStatus := globalInTargetAlready(t, ctx, m.source, m.target, p, carry)
	delete(sources, found.UID)
	writes := int32(len(sources))
	if writes < 3 {
		t.Fatalf("the fleet has %d objects with a status to carry, want several", writes)
	}

	for _, k := range []int32{0, writes / 2, writes - 1} {
		crashing := failAfter(watchable(t, env.Target.Config), k, "patch/status")
		err := copyAll(t, ctx, newCopier(m.source, crashing, p, m.op).CarryStatus(carry), p)
		if !errorContains(err, "injected crash") {
			t.Fatalf("the copy interrupted after %d status writes returned %v", k, err)
		}
	}
	if err := copyAll(t, ctx, newCopier(m.source, m.target, p, m.op).CarryStatus(carry), p); err != nil {
		t.Fatalf("resuming the copy: %v", err)
	}

	targetUIDs := map[types.UID]types.UID{}
	copies := map[types.UID]*unstructured.Unstructured{}
	for _, o := range p.Objects() {
		copy, err := get(ctx, m.target, o.GVK, o.Namespace, o.Name)
		if err != nil {
			t.Fatalf("reading the copy of %s: %v", o.ObjectRef, err)
		}
		targetUIDs[o.UID], copies[o.UID] = copy.GetUID(), copy
	}
	for uid, src := range sources {
		copy := copies[uid]
		want := expectedStatus(src, copy.GetGeneration(), targetUIDs)
		if diff := cmp.Diff(want, copy.Object["status"]); diff != "" {
			t.Errorf("the status of %s %s/%s in the target differs from the source's (-want +got):\n%s",
				src.GetKind(), src.GetNamespace(), src.GetName(), diff)
		}
	}
	if diff := cmp.Diff(foundStatus, copies[found.UID].Object["status"]); diff != "" {
		t.Errorf("the status of %s, which the target had, changed (-target's +now):\n%s", found.ObjectRef, diff)
	}
	poolCopy := copies[pool.GetUID()]
	refs, _, _ := unstructured.NestedSlice(poolCopy.Object, "status", "nodeRefs")
	if got := uidsOf(refs); !cmp.Equal(got, []string{workloadNodeUID, string(targetUIDs[infra.GetUID()])}) {
		t.Errorf("the MachinePool's status names %v, want the workload Node's UID as it was and its LoopMachinePool's copy %s", got, targetUIDs[infra.GetUID()])
	}

	// The rest of the move, and its result without the status: the
	// managed fields are the source's, whatever the status writes did.
	if err := m.delete(ctx, p, m.source); err != nil {
		t.Fatalf("deleting from the source: %v", err)
	}
	m.restore(ctx, p.Types())
	// The global object the target had is the target's, not a copy.
	withoutFound := func(s *snapshot.Snapshot) *snapshot.Snapshot {
		out := &snapshot.Snapshot{}
		for _, o := range s.Objects {
			if o.Namespace != "" || o.Name != found.Name {
				out.Objects = append(out.Objects, o)
			}
		}
		return out
	}
	if d := snapshot.Diff(withoutFound(before), withoutFound(f.snapshot(t, ctx, m.target))); d != "" {
		t.Errorf("the target differs from the source before the move (-source +target):\n%s", d)
	}
}

// globalInTargetAlready creates in the target, with a status of the
// target's own, a global object of the plan whose status the move would
// carry, and returns it with that status.
func globalInTargetAlready(t *testing.T, ctx context.Context, source, target client.Client, p *graph.Plan, carry func(schema.GroupKind) bool) (*graph.Object, any) {
	t.Helper()
	for _, o := range p.Objects() {
		if !o.Global || !carry(o.GroupKind()) {
			continue
		}
		src, err := get(ctx, source, o.GVK, o.Namespace, o.Name)
		if err != nil {
			t.Fatalf("reading %s: %v", o.ObjectRef, err)
		}
		existing := &unstructured.Unstructured{Object: map[string]any{"spec": src.Object["spec"]}}
		existing.SetGroupVersionKind(o.GVK)
		existing.SetName(o.Name)
		existing.SetLabels(src.GetLabels())
		create(t, ctx, target, existing)
		t.Cleanup(func() { _ = target.Delete(context.Background(), existing) })
		status := map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "TargetsOwn", "lastTransitionTime": "2026-01-02T03:04:05Z",
		}}}
		patch, _ := json.Marshal(map[string]any{"status": status})
		if err := target.Status().Patch(ctx, existing, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("writing the target's status of %s: %v", o.ObjectRef, err)
		}
		return o, status
	}
	t.Fatalf("the plan has no global object with a status subresource")
	return nil, nil
}

// namePoolsInfrastructureInItsStatus makes the fleet's MachinePool name,
// in its status, its LoopMachinePool by UID, beside a workload Node, as
// statuses name objects in corev1.ObjectReferences. It returns both.
func namePoolsInfrastructureInItsStatus(t *testing.T, ctx context.Context, c client.Client, namespaces []string) (pool, infra *unstructured.Unstructured) {
	t.Helper()
	for _, ns := range namespaces {
		pools := &unstructured.UnstructuredList{}
		pools.SetGroupVersionKind(machinePoolGVK.GroupVersion().WithKind("MachinePoolList"))
		if err := c.List(ctx, pools, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing MachinePools: %v", err)
		}
		if len(pools.Items) == 0 {
			continue
		}
		pool = &pools.Items[0]
		name, _, _ := unstructured.NestedString(pool.Object, "spec", "template", "spec", "infrastructureRef", "name")
		var err error
		if infra, err = get(ctx, c, loopMachinePoolGVK, ns, name); err != nil {
			t.Fatalf("reading the MachinePool's LoopMachinePool %s/%s: %v", ns, name, err)
		}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"nodeRefs": []any{
			map[string]any{"apiVersion": "v1", "kind": "Node", "name": pool.GetName() + "-node", "uid": workloadNodeUID},
			map[string]any{"apiVersion": loopMachinePoolGVK.GroupVersion().String(), "kind": loopMachinePoolGVK.Kind, "namespace": ns, "name": name, "uid": string(infra.GetUID())},
		}}})
		if err := c.Status().Patch(ctx, pool, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("writing the MachinePool's status: %v", err)
		}
		return pool, infra
	}
	t.Fatalf("the fleet has no MachinePool")
	return nil, nil
}

// expectedStatus is the status the copy of src must have: the source's,
// its observedGenerations those of the copy where they were the source's
// generation and gone where they were older, moved objects' UIDs their
// copies'.
func expectedStatus(src *unstructured.Unstructured, copyGeneration int64, targetUIDs map[types.UID]types.UID) any {
	status := runtime.DeepCopyJSONValue(src.Object["status"]).(map[string]any)
	mapGeneration := func(m map[string]any) {
		if g, ok := m["observedGeneration"].(int64); ok {
			if g == src.GetGeneration() {
				m["observedGeneration"] = copyGeneration
			} else {
				delete(m, "observedGeneration")
			}
		}
	}
	mapGeneration(status)
	for _, path := range [][]string{{"conditions"}, {"deprecated", "v1beta1", "conditions"}, {"v1beta2", "conditions"}} {
		conditions, _, _ := unstructured.NestedSlice(status, path...)
		for _, c := range conditions {
			mapGeneration(c.(map[string]any))
		}
		if conditions != nil {
			_ = unstructured.SetNestedSlice(status, conditions, path...)
		}
	}
	var rewrite func(v any) any
	rewrite = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, item := range v {
				v[k] = rewrite(item)
			}
		case []any:
			for i, item := range v {
				v[i] = rewrite(item)
			}
		case string:
			if to, ok := targetUIDs[types.UID(v)]; ok {
				return string(to)
			}
		}
		return v
	}
	return rewrite(status)
}

func uidsOf(refs []any) []string {
	var out []string
	for _, r := range refs {
		uid, _, _ := unstructured.NestedString(r.(map[string]any), "uid")
		out = append(out, uid)
	}
	return out
}
