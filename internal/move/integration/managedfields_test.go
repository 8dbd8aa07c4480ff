//go:build cluster

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/test/snapshot"
)

// entries returns the managed fields of an object in a comparable form: the
// field sets parsed, so that the order of keys does not matter, and owner
// UIDs replaced as rename says (source UID to target UID), or the owner
// reference's path dropped where rename maps a UID to "".
func entries(t *testing.T, u *unstructured.Unstructured, rename map[types.UID]types.UID) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range u.GetManagedFields() {
		raw := "{}"
		if e.FieldsV1 != nil {
			raw = string(e.FieldsV1.GetRawBytes())
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(raw), &fields); err != nil {
			t.Fatalf("fields of %s: %v", e.Manager, err)
		}
		metadata, _ := fields["f:metadata"].(map[string]any)
		if refs, ok := metadata["f:ownerReferences"].(map[string]any); ok {
			for from, to := range rename {
				key := `k:{"uid":"` + string(from) + `"}`
				sub, ok := refs[key]
				if !ok {
					continue
				}
				delete(refs, key)
				if to != "" {
					refs[`k:{"uid":"`+string(to)+`"}`] = sub
				}
			}
		}
		var when string
		if e.Time != nil {
			when = e.Time.UTC().String()
		}
		out = append(out, map[string]any{
			"manager": e.Manager, "operation": string(e.Operation), "apiVersion": e.APIVersion,
			"subresource": e.Subresource, "time": when, "fields": fields,
		})
	}
	return out
}

// managedBy adds a field to a ConfigMap as fieldManager would, with an
// update (merge patch) or a server-side apply.
func managedBy(t *testing.T, ctx context.Context, c client.Client, cm *unstructured.Unstructured, fieldManager string, apply bool, key string, refs ...metav1.OwnerReference) {
	t.Helper()
	var err error
	if apply {
		intent := configMap(cm.GetNamespace(), cm.GetName())
		intent.Object["data"] = map[string]any{key: fieldManager}
		intent.SetOwnerReferences(refs)
		//nolint:staticcheck // an apply patch as controllers send it, to give the object an Apply manager
		err = c.Patch(ctx, intent, client.Apply, client.FieldOwner(fieldManager), client.ForceOwnership)
	} else {
		patch, _ := json.Marshal(map[string]any{"data": map[string]any{key: fieldManager}})
		err = c.Patch(ctx, cm.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager))
	}
	if err != nil {
		t.Fatalf("%s setting %s on ConfigMap %s: %v", fieldManager, key, cm.GetName(), err)
	}
}

// TestCopyKeepsEveryFieldManagerWithOwnerUIDsRewritten moves a ConfigMap
// that an Apply manager and two Update managers share, owned by a moved
// ConfigMap, its reference set by the Apply manager: the copy must carry the
// same entries, times included, naming the owner by its target UID.
func TestCopyKeepsEveryFieldManagerWithOwnerUIDsRewritten(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "managers")
	op := operation()

	owner := configMap(ns, "owner", forceMove)
	create(t, ctx, source, owner)
	child := configMap(ns, "child", forceMove)
	if err := source.Create(ctx, child, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	ownerRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	managedBy(t, ctx, source, child, "capi-topology", true, "applied", ownerRef)
	managedBy(t, ctx, source, child, "other-controller", false, "updated")

	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if o, ok := p.Object(child.GetUID()); !ok || o.Group <= mustObject(t, p, owner.GetUID()).Group {
		t.Fatalf("plan: want the child copied after its owner:\n%s", p)
	}
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}

	before, _ := get(ctx, source, configMapGVK, ns, "child")
	after, err := get(ctx, target, configMapGVK, ns, "child")
	if err != nil {
		t.Fatal(err)
	}
	targetOwner, _ := get(ctx, target, configMapGVK, ns, "owner")
	if managers := len(before.GetManagedFields()); managers != 3 {
		t.Fatalf("the source object has %d managers, want creator, capi-topology and other-controller:\n%v", managers, entries(t, before, nil))
	}
	want := entries(t, before, map[types.UID]types.UID{owner.GetUID(): targetOwner.GetUID()})
	if diff := cmp.Diff(want, entries(t, after, nil)); diff != "" {
		t.Errorf("managed fields of the copy differ from the source's with owner UIDs rewritten (-want +got):\n%s", diff)
	}
	for _, e := range after.GetManagedFields() {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.GetRawBytes()), string(owner.GetUID())) {
			t.Errorf("the entry of %s names a source UID: %s", e.Manager, e.FieldsV1.GetRawBytes())
		}
	}
}

// TestCopyKeepsUpdateManagersWithoutAnApplyManager shows what the copy used
// to lose: without an Apply manager, the copy was left with the operator's
// single entry for every field, and who set what was gone.
func TestCopyKeepsUpdateManagersWithoutAnApplyManager(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "updaters")
	op := operation()
	cm := configMap(ns, "cm", forceMove)
	if err := source.Create(ctx, cm, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	managedBy(t, ctx, source, cm, "other-controller", false, "updated")

	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	before, _ := get(ctx, source, configMapGVK, ns, "cm")
	after, err := get(ctx, target, configMapGVK, ns, "cm")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries(t, before, nil), entries(t, after, nil)); diff != "" {
		t.Errorf("managed fields differ between source and target (-source +target):\n%s", diff)
	}
}

// TestAnOwnershipCycleKeepsTheApplyManagersOwnerReferences copies two
// ConfigMaps that own each other, their references set by server-side
// apply. Their owners are linked after both exist; a write of the managed
// fields before that link would leave the references to the operator.
func TestAnOwnershipCycleKeepsTheApplyManagersOwnerReferences(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "cyclemanagers")
	op := operation()
	a, b := configMap(ns, "a", forceMove), configMap(ns, "b", forceMove)
	create(t, ctx, source, a, b)
	managedBy(t, ctx, source, a, "capi-topology", true, "applied", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: b.GetUID()})
	managedBy(t, ctx, source, b, "capi-topology", true, "applied", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: a.GetUID()})
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if len(p.Groups) != 1 || p.Len() != 2 {
		t.Fatalf("plan: want both ConfigMaps in one group:\n%s", p)
	}
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	ta, _ := get(ctx, target, configMapGVK, ns, "a")
	tb, _ := get(ctx, target, configMapGVK, ns, "b")
	rename := map[types.UID]types.UID{a.GetUID(): ta.GetUID(), b.GetUID(): tb.GetUID()}
	for _, name := range []string{"a", "b"} {
		before, _ := get(ctx, source, configMapGVK, ns, name)
		after, _ := get(ctx, target, configMapGVK, ns, name)
		if diff := cmp.Diff(entries(t, before, rename), entries(t, after, nil)); diff != "" {
			t.Errorf("managed fields of %s differ from the source's with owner UIDs rewritten (-want +got):\n%s", name, diff)
		}
	}
}

// TestACopyResumedAfterACrashRestoresTheManagedFields stops a copy right
// after the create of an owned object, before its managed fields were
// written, as a crash would: a new Copier, as after a restart, finds the
// copy as its own and writes them, pointed at the owner's target UID.
func TestACopyResumedAfterACrashRestoresTheManagedFields(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "resumemanagers")
	op := operation()
	owner, cm := configMap(ns, "owner", forceMove), configMap(ns, "cm", forceMove)
	create(t, ctx, source, owner)
	if err := source.Create(ctx, cm, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	managedBy(t, ctx, source, cm, "capi-topology", true, "applied", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.GetUID()})
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})

	crash := errors.New("the operator stops here")
	direct, err := client.NewWithWatch(env.Target.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crashing := interceptor.NewClient(direct, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if data, _ := patch.Data(obj); obj.GetName() == "cm" && strings.Contains(string(data), `"managedFields"`) {
				return crash
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	if err := copyAll(t, ctx, newCopier(source, crashing, p, op), p); !errors.Is(err, crash) {
		t.Fatalf("copying until the crash: %v, want the crash", err)
	}
	if got, err := get(ctx, target, configMapGVK, ns, "cm"); err != nil || len(got.GetManagedFields()) != 1 {
		t.Fatalf("before the resume the copy should exist with the creator's entry alone: %v, %v", err, got.GetManagedFields())
	}

	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("resuming the copy: %v", err)
	}
	before, _ := get(ctx, source, configMapGVK, ns, "cm")
	after, _ := get(ctx, target, configMapGVK, ns, "cm")
	targetOwner, _ := get(ctx, target, configMapGVK, ns, "owner")
	want := entries(t, before, map[types.UID]types.UID{owner.GetUID(): targetOwner.GetUID()})
	if diff := cmp.Diff(want, entries(t, after, nil)); diff != "" {
		t.Errorf("after the resume, managed fields of the copy differ from the source's with owner UIDs rewritten (-want +got):\n%s", diff)
	}
}

func mustObject(t *testing.T, p *graph.Plan, uid types.UID) *graph.Object {
	t.Helper()
	o, ok := p.Object(uid)
	if !ok {
		t.Fatalf("plan lacks %s:\n%s", uid, p)
	}
	return o
}

// TestSnapshotsCompareManagersAndFindUIDsThatNameNothing checks the
// snapshot's comparison on real clusters: after a copy the managers of
// source and target compare equal; managed fields that keep the source's
// owner UIDs, as clusterctl's move leaves them, and an owner reference whose
// UID names no object, are reported.
func TestSnapshotsCompareManagersAndFindUIDsThatNameNothing(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "snapshotmanagers")
	op := operation()
	owner, child := configMap(ns, "owner", forceMove), configMap(ns, "child", forceMove)
	create(t, ctx, source, owner)
	if err := source.Create(ctx, child, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	managedBy(t, ctx, source, child, "capi-topology", true, "applied",
		metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)})
	managedBy(t, ctx, source, child, "other-controller", false, "updated")
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	take := func(c client.Reader) *snapshot.Snapshot {
		s, err := snapshot.Take(ctx, c, snapshot.Options{Namespaces: []string{ns}, UpdateManagers: true})
		if err != nil {
			t.Fatalf("taking a snapshot: %v", err)
		}
		return s
	}
	before := take(source)
	if o, _ := before.Get(snapshot.Key{Kind: "ConfigMap", Namespace: ns, Name: "child"}); len(o.Managers) != 3 || len(o.Owners) != 1 || !o.Owners[0].BlockOwnerDeletion {
		t.Fatalf("the snapshot of the source's child holds managers %+v and owners %+v, want creator, capi-topology and other-controller, and the owner blocking deletion", o.Managers, o.Owners)
	}
	if d := snapshot.Diff(before, take(target)); d != "" {
		t.Fatalf("the target differs from the source after the copy (-source +target):\n%s", d)
	}

	// The source's managed fields as they are, source UIDs in their
	// paths: what clusterctl's move restores.
	sourceChild, _ := get(ctx, source, configMapGVK, ns, "child")
	targetChild, _ := get(ctx, target, configMapGVK, ns, "child")
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": sourceChild.GetManagedFields()}})
	if err := target.Patch(ctx, targetChild, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	// And an owner reference to an owner that does not exist, of an API
	// version no longer served, which the garbage collector leaves alone.
	patch, _ = json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{
		{APIVersion: "cluster.x-k8s.io/v1alpha3", Kind: "Cluster", Name: "deleted-long-ago", UID: sourceChild.GetUID()},
	}}})
	if err := target.Patch(ctx, configMap(ns, "owner"), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	d := snapshot.Diff(before, take(target))
	for _, want := range []string{
		"! ConfigMap " + ns + "/child: managed fields of capi-topology (Apply) name an owner reference the object does not have",
		"! ConfigMap " + ns + "/owner: ownerReference to Cluster.cluster.x-k8s.io deleted-long-ago: no such object with its UID in the cluster",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("the diff does not say %q:\n%s", want, d)
		}
	}
}
