//go:build cluster

package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/test/fleet"
)

func operation() string { return "op-" + rand.String(8) }

func TestDeleteGroupNeverTouchesAnObjectThatReplacedThePlannedOne(t *testing.T) {
	ctx := testContext(t)
	source, _ := clients(t)
	ns := namespace(t, "replaced")
	create(t, ctx, source, configMap(ns, "cm", forceMove))
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if p.Len() != 1 {
		t.Fatalf("plan holds %d objects, want the ConfigMap:\n%s", p.Len(), p)
	}

	// Replace the ConfigMap by another of the same name, with a finalizer.
	if err := source.Delete(ctx, configMap(ns, "cm")); err != nil {
		t.Fatal(err)
	}
	replacement := configMap(ns, "cm")
	replacement.SetFinalizers([]string{"example.com/keep"})
	create(t, ctx, source, replacement)
	t.Cleanup(func() {
		_ = source.Patch(context.Background(), replacement, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})

	res, err := move.DeleteGroup(ctx, source, p, 0, move.Options{})
	if err != nil {
		t.Fatalf("DeleteGroup: %v", err)
	}
	if res.Gone != 1 || res.Deleted != 0 {
		t.Errorf("DeleteGroup result %+v, want the planned object counted as gone", res)
	}
	got, err := get(ctx, source, configMapGVK, ns, "cm")
	if err != nil {
		t.Fatalf("the replacement is gone: %v", err)
	}
	if got.GetDeletionTimestamp() != nil || len(got.GetFinalizers()) != 1 || got.GetAnnotations()[graph.DeleteForMoveAnnotation] != "" ||
		len(got.GetAnnotations()) != 0 {
		t.Errorf("the replacement was touched: deletionTimestamp %v, finalizers %v, annotations %v",
			got.GetDeletionTimestamp(), got.GetFinalizers(), got.GetAnnotations())
	}
}

func TestDeleteGroupDeletesAtOnceWithTheDeleteForMoveAnnotation(t *testing.T) {
	ctx := testContext(t)
	source, _ := clients(t)
	ns := namespace(t, "delete")
	cm := configMap(ns, "cm", forceMove)
	cm.SetFinalizers([]string{"example.com/keep"})
	create(t, ctx, source, cm)
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})

	// Observe the object as the DELETE finds it: annotated and without
	// finalizers, so that it goes at once.
	watcher, err := client.NewWithWatch(env.Source.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}},
		client.InNamespace(ns))
	if err != nil {
		t.Fatalf("watching: %v", err)
	}
	defer w.Stop()

	for range 2 { // the second run finds nothing left: progress, not an error
		if _, err := move.DeleteGroup(ctx, source, p, 0, move.Options{}); err != nil {
			t.Fatalf("DeleteGroup: %v", err)
		}
	}
	if _, err := get(ctx, source, configMapGVK, ns, "cm"); err == nil {
		t.Fatalf("the ConfigMap still exists")
	}
	var last *metav1.PartialObjectMetadata
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(*metav1.PartialObjectMetadata); ok && o.Name == "cm" {
			last = o
		}
		if ev.Type == "DELETED" {
			break
		}
	}
	if last == nil {
		t.Fatalf("no deletion observed")
	}
	if _, ok := last.Annotations[graph.DeleteForMoveAnnotation]; !ok || len(last.Finalizers) != 0 {
		t.Errorf("deleted object had annotations %v and finalizers %v, want the delete-for-move annotation and none",
			last.Annotations, last.Finalizers)
	}
}

// An object planned without finalizers goes by its DELETE alone, on
// condition that it is as the plan read it. One changed since (here given a
// finalizer, which a DELETE alone would leave stuck in deletion) goes the
// long way: annotated, finalizers dropped, deleted.
func TestDeleteGroupTakesTheLongWayForAnObjectChangedSinceThePlan(t *testing.T) {
	ctx := testContext(t)
	source, _ := clients(t)
	ns := namespace(t, "changed")
	create(t, ctx, source, configMap(ns, "plain", forceMove), configMap(ns, "changed", forceMove))
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if p.Len() != 2 {
		t.Fatalf("plan holds %d objects, want the two ConfigMaps:\n%s", p.Len(), p)
	}
	changed := configMap(ns, "changed")
	if err := source.Patch(ctx, changed, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/late"]}}`))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = source.Patch(context.Background(), changed, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})

	res, err := move.DeleteGroup(ctx, source, p, 0, move.Options{})
	if err != nil {
		t.Fatalf("DeleteGroup: %v", err)
	}
	if res.Deleted != 2 {
		t.Errorf("DeleteGroup result %+v, want both deleted", res)
	}
	for _, name := range []string{"plain", "changed"} {
		if got, err := get(ctx, source, configMapGVK, ns, name); err == nil {
			t.Errorf("%s is still in the source: deletionTimestamp %v, finalizers %v", name, got.GetDeletionTimestamp(), got.GetFinalizers())
		}
	}
}

func TestCopyReportsAConflictingObjectByName(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "conflict")
	op := operation()
	create(t, ctx, source, configMap(ns, "mine", forceMove), configMap(ns, "theirs", forceMove))
	if err := move.EnsureNamespace(ctx, target, ns); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, target, configMap(ns, "theirs"))

	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	err := copyAll(t, ctx, newCopier(source, target, p, op), p)
	var conflict *move.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("CopyGroup: %v, want a ConflictError", err)
	}
	if want := fmt.Sprintf("ConfigMap %s/theirs already exists in the target and was not created by this move", ns); !errorContains(err, want) {
		t.Errorf("error %q does not say %q", err, want)
	}

	// Rolling back removes what the copy created and leaves the other
	// object, and the namespace holding it, alone.
	if _, err := move.Rollback(ctx, target, p.Types(), p, op, copiesOf(op), move.Options{}); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if _, err := get(ctx, target, configMapGVK, ns, "mine"); err == nil {
		t.Errorf("the copied ConfigMap survived the rollback")
	}
	if _, err := get(ctx, target, configMapGVK, ns, "theirs"); err != nil {
		t.Errorf("the conflicting ConfigMap was removed by the rollback: %v", err)
	}
	if got, err := get(ctx, target, namespaceGVK, "", ns); err != nil || got.GetDeletionTimestamp() != nil {
		t.Errorf("the namespace holding the conflicting ConfigMap was deleted by the rollback (%v)", err)
	}
}

func TestRollbackDeletesTheNamespacesTheCopyCreated(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "fresh")
	op := operation()
	create(t, ctx, source, configMap(ns, "cm", forceMove))
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	if got, err := get(ctx, target, namespaceGVK, "", ns); err != nil || !slices.ContainsFunc(got.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == move.FieldOwner(op) }) {
		t.Fatalf("the copy did not create namespace %s with the operation's field manager: %v (%v)", ns, got.GetManagedFields(), err)
	}
	n, err := move.Rollback(ctx, target, p.Types(), p, op, copiesOf(op), move.Options{})
	if err != nil || n != 2 {
		t.Fatalf("Rollback: %d deleted, %v; want the ConfigMap and the namespace", n, err)
	}
	if got, err := get(ctx, target, namespaceGVK, "", ns); err == nil && got.GetDeletionTimestamp() == nil {
		t.Errorf("namespace %s survived the rollback", ns)
	}
}

func TestCopyKeepsServerSideApplyOwnership(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "ssa")
	op := operation()
	applied := configMap(ns, "applied", forceMove)
	//nolint:staticcheck // an apply patch as Cluster API topology sends it, to check the copy keeps its ownership
	if err := source.Patch(ctx, applied, client.Apply, client.FieldOwner("capi-topology"), client.ForceOwnership); err != nil {
		t.Fatalf("applying: %v", err)
	}
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	before, _ := get(ctx, source, configMapGVK, ns, "applied")
	after, err := get(ctx, target, configMapGVK, ns, "applied")
	if err != nil {
		t.Fatal(err)
	}
	managers := func(u *unstructured.Unstructured) []string {
		var out []string
		for _, f := range u.GetManagedFields() {
			out = append(out, fmt.Sprintf("%s/%s: %s", f.Manager, f.Operation, f.FieldsV1.String()))
		}
		return out
	}
	if diff := cmp.Diff(managers(before), managers(after)); diff != "" {
		t.Errorf("managed fields differ between source and target (-source +target):\n%s", diff)
	}
}

func TestPauseIsRecognisedAsThisOperations(t *testing.T) {
	ctx := testContext(t)
	source, _ := clients(t)
	ns := namespace(t, "pause")
	op := operation()
	cluster := func(name string, paused bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(clusterGVK)
		u.SetNamespace(ns)
		u.SetName(name)
		u.Object["spec"] = map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "LoopCluster", "name": name,
		}}
		if paused {
			u.Object["spec"].(map[string]any)["paused"] = true
		}
		return u
	}
	create(t, ctx, source, cluster("free", false))
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})

	for i := range 2 { // pausing again is a no-op, not "paused by someone else"
		if err := move.Pause(ctx, source, p, op, move.Options{}); err != nil {
			t.Fatalf("Pause #%d: %v", i+1, err)
		}
	}
	got, _ := get(ctx, source, clusterGVK, ns, "free")
	if paused, _, _ := unstructured.NestedBool(got.Object, "spec", "paused"); !paused || got.GetAnnotations()[movev1alpha1.PausedByAnnotation] != op {
		t.Errorf("Cluster spec.paused %t, paused-by %q; want true and %q", paused, got.GetAnnotations()[movev1alpha1.PausedByAnnotation], op)
	}
	// Rebuilt after pausing, the plan does not count this pause as someone else's.
	if others := plan(t, ctx, source, []string{ns}, graph.Selection{}).PausedByOthers(op); len(others) != 0 {
		t.Errorf("PausedByOthers = %v after this operation paused", others)
	}

	// Someone else's pause is left as it is (no paused-by mark), and never undone.
	create(t, ctx, source, cluster("theirs", true))
	p = plan(t, ctx, source, []string{ns}, graph.Selection{})
	if err := move.Pause(ctx, source, p, op, move.Options{}); err != nil {
		t.Fatalf("Pause with a Cluster paused by someone else: %v", err)
	}
	if got, _ := get(ctx, source, clusterGVK, ns, "theirs"); got.GetAnnotations()[movev1alpha1.PausedByAnnotation] != "" {
		t.Errorf("Pause marked someone else's pause as its own: %v", got.GetAnnotations())
	}
	n, err := move.Unpause(ctx, source, p.Types(), op, move.Options{})
	if err != nil || n != 1 {
		t.Fatalf("Unpause: %d, %v; want 1 unpaused", n, err)
	}
	got, _ = get(ctx, source, clusterGVK, ns, "free")
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "paused"); found || got.GetAnnotations()[movev1alpha1.PausedByAnnotation] != "" {
		t.Errorf("after Unpause the Cluster has spec.paused %t and annotations %v", found, got.GetAnnotations())
	}
	got, _ = get(ctx, source, clusterGVK, ns, "theirs")
	if paused, _, _ := unstructured.NestedBool(got.Object, "spec", "paused"); !paused {
		t.Errorf("Unpause undid someone else's pause")
	}
}

func TestBlockersAreTheObjectsThatCarryTheAnnotationNow(t *testing.T) {
	ctx := testContext(t)
	source, _ := clients(t)
	ns := namespace(t, "block")
	create(t, ctx, source, configMap(ns, "busy", forceMove, map[string]string{graph.BlockMoveAnnotation: "true"}), configMap(ns, "idle", forceMove))
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})

	blockers, err := move.Blockers(ctx, source, p)
	if err != nil || len(blockers) != 1 || blockers[0].Namespace != ns || blockers[0].Name != "busy" {
		t.Fatalf("Blockers: %v, %v; want ConfigMap %s/busy", blockers, err, ns)
	}
	err = source.Patch(ctx, configMap(ns, "busy"), client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+graph.BlockMoveAnnotation+`":null}}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if blockers, err := move.Blockers(ctx, source, p); err != nil || len(blockers) != 0 {
		t.Fatalf("Blockers after the annotation was dropped: %v, %v; want none", blockers, err)
	}
}

func TestDiscoverReadsPageByPage(t *testing.T) {
	ctx := testContext(t)
	source, _ := clients(t)
	ns := namespace(t, "pages")
	for i := range 23 {
		create(t, ctx, source, configMap(ns, fmt.Sprintf("cm-%02d", i), forceMove))
	}
	types, err := graph.DiscoverTypes(ctx, source)
	if err != nil {
		t.Fatal(err)
	}
	var plans []string
	for _, size := range []int64{4, graph.DefaultPageSize} {
		g, err := graph.Discover(ctx, source, types, graph.DiscoverOptions{Namespaces: []string{ns}, PageSize: size})
		if err != nil {
			t.Fatalf("Discover with pages of %d: %v", size, err)
		}
		p := g.Plan(graph.Selection{})
		if p.Len() != 23 {
			t.Errorf("pages of %d: plan holds %d objects, want 23", size, p.Len())
		}
		plans = append(plans, p.String())
	}
	if diff := cmp.Diff(plans[1], plans[0]); diff != "" {
		t.Errorf("plans read in pages of 4 and of %d differ (-large +small):\n%s", graph.DefaultPageSize, diff)
	}
}

func TestAnOwnershipCycleIsLinkedOnceTheGroupExists(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "cycle")
	op := operation()
	a, b := configMap(ns, "a", forceMove), configMap(ns, "b", forceMove)
	create(t, ctx, source, a)
	b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: a.GetUID()}})
	create(t, ctx, source, b)
	a.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: b.GetUID()}})
	if err := source.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	if len(p.Groups) != 1 || p.Len() != 2 {
		t.Fatalf("plan: want both ConfigMaps in one group:\n%s", p)
	}
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	ta, _ := get(ctx, target, configMapGVK, ns, "a")
	tb, _ := get(ctx, target, configMapGVK, ns, "b")
	owner := func(u *unstructured.Unstructured) string {
		if refs := u.GetOwnerReferences(); len(refs) == 1 {
			return refs[0].Name + "/" + string(refs[0].UID)
		}
		return fmt.Sprint(u.GetOwnerReferences())
	}
	if owner(ta) != "b/"+string(tb.GetUID()) || owner(tb) != "a/"+string(ta.GetUID()) {
		t.Errorf("in the target a is owned by %s and b by %s; want each by the other's target UID (a %s, b %s)",
			owner(ta), owner(tb), ta.GetUID(), tb.GetUID())
	}
}

func TestAGlobalObjectAlreadyInTheTargetIsUsedAsFound(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns := namespace(t, "global")
	op := operation()
	name := ns + "-identity"
	identity := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopClusterIdentity"})
		u.SetName(name)
		u.SetLabels(map[string]string{graph.MoveHierarchyLabel: ""})
		u.Object["spec"] = map[string]any{"secretRef": name + "-credentials", "allowedNamespaces": map[string]any{"list": []any{ns}}}
		return u
	}
	sourceIdentity, targetIdentity := identity(), identity()
	create(t, ctx, source, sourceIdentity)
	create(t, ctx, target, targetIdentity)
	credentials := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"key": "value"}}}
	credentials.SetNamespace(fleet.ProviderNamespace)
	credentials.SetName(name + "-credentials")
	credentials.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "LoopClusterIdentity", Name: name, UID: sourceIdentity.GetUID()}})
	create(t, ctx, source, credentials)
	t.Cleanup(func() {
		for _, c := range []client.Client{source, target} {
			_ = c.Delete(context.Background(), identity())
			_ = c.Delete(context.Background(), credentials.DeepCopy())
		}
	})

	p := plan(t, ctx, source, []string{ns}, graph.Selection{})
	o, ok := p.Object(credentials.GetUID())
	if !ok || o.Delete || !o.InGlobalHierarchy {
		t.Fatalf("the credentials should be copied, not deleted, as part of the identity's hierarchy:\n%s", p)
	}
	// As the move records its plan: what the target has already is found.
	inTarget, err := preflight.CheckTarget(ctx, source, target, "target", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Objects() {
		o.FoundInTarget = inTarget.Found[o.UID]
	}
	if id, _ := p.Object(sourceIdentity.GetUID()); !id.FoundInTarget {
		t.Fatalf("the identity the target has is not found there")
	}
	before, _ := get(ctx, target, targetIdentity.GroupVersionKind(), "", name)
	if err := copyAll(t, ctx, newCopier(source, target, p, op), p); err != nil {
		t.Fatalf("copying: %v", err)
	}
	got, err := get(ctx, target, credentials.GroupVersionKind(), fleet.ProviderNamespace, credentials.GetName())
	if err != nil {
		t.Fatalf("the credentials were not copied: %v", err)
	}
	if refs := got.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != targetIdentity.GetUID() {
		t.Errorf("the credentials in the target are owned by %v, want the identity found there (%s)", refs, targetIdentity.GetUID())
	}
	found, _ := get(ctx, target, targetIdentity.GroupVersionKind(), "", name)
	if found.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the identity found in the target was changed: resourceVersion %s, was %s", found.GetResourceVersion(), before.GetResourceVersion())
	}

	if _, err := move.Rollback(ctx, target, p.Types(), p, op, copiesOf(op), move.Options{}); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if _, err := get(ctx, target, targetIdentity.GroupVersionKind(), "", name); err != nil {
		t.Errorf("the rollback deleted the identity the target already had: %v", err)
	}
	if _, err := get(ctx, target, credentials.GroupVersionKind(), fleet.ProviderNamespace, credentials.GetName()); err == nil {
		t.Errorf("the rollback left the credentials the copy created")
	}
}

// TestCopyReportsObjectsGoneFromTheSourceAsVanished deletes one planned
// object from the source before its group is copied, and deletes and
// creates another again under its name: the copy reports each as a
// *VanishedError (the moved set changed, and no retry brings them back:
// the operator rolls back at once instead of waiting for the copy
// timeout), copies the others, and creates nothing for either.
func TestCopyReportsObjectsGoneFromTheSourceAsVanished(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns, p, group := oneGroupOfConfigMaps(t, ctx, source, "vanished", 4)
	if err := source.Delete(ctx, configMap(ns, "cm-1")); err != nil {
		t.Fatal(err)
	}
	if err := source.Delete(ctx, configMap(ns, "cm-2")); err != nil {
		t.Fatal(err)
	}
	replacement := configMap(ns, "cm-2", forceMove)
	create(t, ctx, source, replacement)

	_, err := move.NewCopier(source, target, p, operation(), move.Options{}).CopyGroup(ctx, group)
	var groupErr *move.GroupError
	if !errors.As(err, &groupErr) {
		t.Fatalf("CopyGroup returned %v, want the failures of the two objects", err)
	}
	got := map[string]types.UID{}
	for _, e := range groupErr.Errors {
		var vanished *move.VanishedError
		if !errors.As(e, &vanished) {
			t.Errorf("failure %q is not a VanishedError", e)
			continue
		}
		got[vanished.Object.Name] = vanished.ReplacedBy
	}
	if diff := cmp.Diff(map[string]types.UID{"cm-1": "", "cm-2": replacement.GetUID()}, got); diff != "" {
		t.Errorf("vanished objects differ (-want +got):\n%s", diff)
	}
	for name, want := range map[string]bool{"cm-0": true, "cm-1": false, "cm-2": false, "cm-3": true} {
		_, err := get(ctx, target, configMapGVK, ns, name)
		if copied := err == nil; copied != want {
			t.Errorf("%s in the target: %v, want copied = %v", name, err, want)
		}
	}
}
