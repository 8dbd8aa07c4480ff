package move

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
)

func sourceMachine() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       "Machine",
		"metadata": map[string]any{
			"name":                       "m1",
			"generateName":               "m",
			"namespace":                  "ns1",
			"uid":                        "source-uid",
			"resourceVersion":            "42",
			"generation":                 int64(3),
			"creationTimestamp":          "2026-01-01T00:00:00Z",
			"deletionGracePeriodSeconds": int64(0),
			"selfLink":                   "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns1/machines/m1",
			"labels":                     map[string]any{"cluster.x-k8s.io/cluster-name": "c1"},
			"annotations":                map[string]any{"a": "b"},
			"finalizers":                 []any{"machine.cluster.x-k8s.io"},
			"ownerReferences": []any{
				map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "name": "ms", "uid": "ms-source-uid", "controller": true, "blockOwnerDeletion": true},
				map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "web-uid"},
				map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "cluster-source-uid"},
			},
			"managedFields": []any{
				map[string]any{"manager": "capi-topology", "operation": "Apply", "apiVersion": "cluster.x-k8s.io/v1beta2", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{}}},
			},
		},
		"spec":   map[string]any{"clusterName": "c1"},
		"status": map[string]any{"phase": "Running"},
	}}
	return u
}

func TestPrepare(t *testing.T) {
	ownerUIDs := map[types.UID]types.UID{"ms-source-uid": "ms-target-uid", "cluster-source-uid": "cluster-target-uid"}

	t.Run("the copy keeps content, labels, annotations and finalizers, and drops what the target assigns", func(t *testing.T) {
		obj, _ := prepare(sourceMachine(), ownerUIDs, nil)
		want := map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2",
			"kind":       "Machine",
			"metadata": map[string]any{
				"name":        "m1",
				"namespace":   "ns1",
				"labels":      map[string]any{"cluster.x-k8s.io/cluster-name": "c1"},
				"annotations": map[string]any{"a": "b"},
				"finalizers":  []any{"machine.cluster.x-k8s.io"},
				"ownerReferences": []any{
					map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "name": "ms", "uid": "ms-target-uid", "controller": true, "blockOwnerDeletion": true},
					map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "cluster-target-uid"},
				},
			},
			"spec":   map[string]any{"clusterName": "c1"},
			"status": map[string]any{"phase": "Running"},
		}
		if diff := cmp.Diff(want, obj.Object); diff != "" {
			t.Errorf("prepared object differs (-want +got):\n%s", diff)
		}
	})

	t.Run("owner references keep their order, API version, controller and blockOwnerDeletion; only the UID changes", func(t *testing.T) {
		obj, _ := prepare(sourceMachine(), ownerUIDs, nil)
		want := []metav1.OwnerReference{
			{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "MachineSet", Name: "ms", UID: "ms-target-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
			{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1", UID: "cluster-target-uid"},
		}
		if diff := cmp.Diff(want, obj.GetOwnerReferences()); diff != "" {
			t.Errorf("owner references differ (-want +got):\n%s", diff)
		}
	})

	t.Run("references to owners without a target UID are dropped", func(t *testing.T) {
		obj, _ := prepare(sourceMachine(), nil, nil)
		if refs := obj.GetOwnerReferences(); len(refs) != 0 {
			t.Errorf("owner references %v, want none", refs)
		}
	})

	t.Run("every managed fields entry is returned for restoring, Apply and Update alike", func(t *testing.T) {
		_, fields := prepare(sourceMachine(), ownerUIDs, nil)
		if len(fields) != 1 || fields[0].Manager != "capi-topology" {
			t.Errorf("managed fields to restore: %+v, want the capi-topology entry", fields)
		}
		src := sourceMachine()
		updates := []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate},
			{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
		}
		src.SetManagedFields(updates)
		if _, fields := prepare(src, ownerUIDs, nil); !cmp.Equal(fields, updates) {
			t.Errorf("managed fields to restore: %+v, want both Update entries", fields)
		}
	})

	t.Run("the copy carries no mark of the move: its labels are the source's", func(t *testing.T) {
		src := sourceMachine()
		src.SetLabels(nil)
		obj, _ := prepare(src, ownerUIDs, nil)
		if labels := obj.GetLabels(); len(labels) != 0 {
			t.Errorf("labels %v, want none", labels)
		}
	})
}

func TestForEach(t *testing.T) {
	t.Run("no more calls than the concurrency run at once, and every item is visited", func(t *testing.T) {
		var running, peak, visited atomic.Int32
		items := make([]int, 50)
		err := forEach(context.Background(), items, 3, func(context.Context, int) error {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
			running.Add(-1)
			visited.Add(1)
			return nil
		})
		if err != nil {
			t.Fatalf("forEach: %v", err)
		}
		if peak.Load() > 3 || peak.Load() < 2 {
			t.Errorf("peak concurrency %d, want 2 or 3 with a limit of 3", peak.Load())
		}
		if visited.Load() != 50 {
			t.Errorf("visited %d items, want 50", visited.Load())
		}
	})

	t.Run("it stops starting calls once too many failed, and reports how many it skipped", func(t *testing.T) {
		items := make([]int, 100)
		err := forEach(context.Background(), items, 1, func(context.Context, int) error { return errors.New("down") })
		var ge *GroupError
		if !errors.As(err, &ge) {
			t.Fatalf("error %v is not a GroupError", err)
		}
		if len(ge.Errors) != maxGroupErrors || ge.Skipped != 100-maxGroupErrors {
			t.Errorf("%d errors and %d skipped, want %d and %d", len(ge.Errors), ge.Skipped, maxGroupErrors, 100-maxGroupErrors)
		}
	})

	t.Run("a conflict among the failures can be found with errors.As", func(t *testing.T) {
		ref := graph.ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespace: "ns1", Name: "s"}
		err := forEach(context.Background(), []int{1, 2}, 2, func(_ context.Context, i int) error {
			if i == 2 {
				return fmt.Errorf("copying: %w", &ConflictError{Object: ref})
			}
			return errors.New("other")
		})
		var conflict *ConflictError
		if !errors.As(err, &conflict) || conflict.Object != ref {
			t.Fatalf("errors.As(%v) found %v, want the conflict on %s", err, conflict, ref)
		}
		if want := "Secret ns1/s already exists in the target and was not created by this move"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	})
}

func TestErrorClassification(t *testing.T) {
	gr := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machines"}
	tests := []struct {
		name      string
		err       error
		transient bool
		gone      bool
	}{
		{name: "too many requests is transient", err: apierrors.NewTooManyRequests("slow down", 1), transient: true},
		{name: "a server timeout is transient", err: apierrors.NewServerTimeout(gr, "create", 1), transient: true},
		{name: "a refused webhook call is not transient", err: apierrors.NewInternalError(errors.New(`failed calling webhook: connect: connection refused`))},
		{name: "not found means the object is gone", err: apierrors.NewNotFound(gr, "m1"), gone: true},
		{name: "a failed UID precondition means the object is gone", err: apierrors.NewConflict(gr, "m1", errors.New("Precondition failed: UID in precondition")), gone: true},
		{
			name: "a patch naming another UID means the object was replaced",
			err:  apierrors.NewInvalid(gr.WithVersion("").GroupVersion().WithKind("Machine").GroupKind(), "m1", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")}),
			gone: true,
		},
		{
			name: "another invalid patch is an error",
			err:  apierrors.NewInvalid(schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}, "m1", field.ErrorList{field.Invalid(field.NewPath("spec", "clusterName"), "x", "field is immutable")}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.transient {
				t.Errorf("transient = %t, want %t", got, tt.transient)
			}
			if got := gone(tt.err); got != tt.gone {
				t.Errorf("gone = %t, want %t", got, tt.gone)
			}
		})
	}
}

func TestClusterNotProvisioned(t *testing.T) {
	cluster := func(status map[string]any, controlPlane bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}, "status": status}}
		if controlPlane {
			u.Object["spec"].(map[string]any)["controlPlaneRef"] = map[string]any{"name": "cp"}
		}
		return u
	}
	initialized := []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True"}}
	tests := []struct {
		name    string
		cluster *unstructured.Unstructured
		want    string
	}{
		{
			name:    "a Cluster with infrastructure and an initialized control plane is provisioned",
			cluster: cluster(map[string]any{"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true}, "conditions": initialized}, true),
		},
		{
			name:    "a Cluster still provisioning its infrastructure is not",
			cluster: cluster(map[string]any{"conditions": initialized}, false),
			want:    "is still provisioning its infrastructure",
		},
		{
			name:    "a Cluster without the ControlPlaneInitialized condition is not",
			cluster: cluster(map[string]any{"initialization": map[string]any{"infrastructureProvisioned": true}}, false),
			want:    "has no initialized control plane yet (condition ControlPlaneInitialized is not True)",
		},
		{
			name:    "a Cluster with a control plane that is not initialized is not",
			cluster: cluster(map[string]any{"initialization": map[string]any{"infrastructureProvisioned": true}, "conditions": initialized}, true),
			want:    "has no initialized control plane yet (status.initialization.controlPlaneInitialized is not true)",
		},
		{
			name:    "a Cluster stored at v1beta1 is read from the v1beta1 fields",
			cluster: cluster(map[string]any{"infrastructureReady": true, "controlPlaneReady": true, "conditions": initialized}, true),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clusterNotProvisioned(tt.cluster); got != tt.want {
				t.Errorf("clusterNotProvisioned = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSourcesListLargeGroupsAndReadSmallOnesOneByOne(t *testing.T) {
	types := graph.NewTypes(graph.CoreTypes()...)
	configMaps := func(namespace string, n int) []client.Object {
		var out []client.Object
		for i := range n {
			out = append(out, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: fmt.Sprintf("cm-%d", i), UID: uidOf(namespace, i),
				Labels: map[string]string{graph.MoveLabel: ""},
			}})
		}
		return out
	}
	tests := []struct {
		name          string
		objs          []client.Object
		wantLists     int
		wantPreloaded int
	}{
		{name: "ten objects of one kind and namespace are listed", objs: configMaps("many", 10), wantLists: 1, wantPreloaded: 10},
		{name: "three objects are left to be read one by one", objs: configMaps("few", 3)},
		{name: "each kind and namespace is decided on its own", objs: append(configMaps("many", 10), configMaps("few", 3)...), wantLists: 1, wantPreloaded: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lists, gets atomic.Int32
			source := interceptor.NewClient(fake.NewClientBuilder().WithObjects(tt.objs...).Build(), interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists.Add(1)
					return c.List(ctx, list, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					gets.Add(1)
					return c.Get(ctx, key, obj, opts...)
				},
			})
			g := graph.New(types, nil)
			for _, o := range tt.objs {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
				u.SetNamespace(o.GetNamespace())
				u.SetName(o.GetName())
				u.SetUID(o.GetUID())
				u.SetLabels(o.GetLabels())
				if err := g.Add(u); err != nil {
					t.Fatal(err)
				}
			}
			p := g.Plan(graph.Selection{})
			c := NewCopier(source, nil, p, "op", Options{})
			seen, preloaded := 0, 0
			for item := range c.sources(context.Background(), p.Groups[0]) {
				seen++
				if item.source != nil {
					preloaded++
					if item.source.GetUID() != item.object.UID {
						t.Errorf("%s came with the source copy of %s", item.object, item.source.GetName())
					}
				}
			}
			// The objects not listed are read one by one by the copy itself,
			// not by sources.
			if seen != len(tt.objs) || preloaded != tt.wantPreloaded || int(lists.Load()) != tt.wantLists || gets.Load() != 0 {
				t.Errorf("%d items, %d read by a list, %d lists, %d gets; want %d, %d, %d, 0",
					seen, preloaded, lists.Load(), gets.Load(), len(tt.objs), tt.wantPreloaded, tt.wantLists)
			}
		})
	}
}

func uidOf(namespace string, i int) types.UID { return types.UID(fmt.Sprintf("%s-%d", namespace, i)) }

func TestReconciledStatus(t *testing.T) {
	class := func(generation, observed int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
			"metadata": map[string]any{"name": "cc", "namespace": "ns1", "generation": generation},
			"status": map[string]any{
				"observedGeneration": observed,
				"conditions": []any{
					map[string]any{"type": "VariablesReady", "status": "True", "observedGeneration": observed},
					map[string]any{"type": "Other", "status": "True", "observedGeneration": int64(1)},
				},
				"variables": []any{map[string]any{"name": "v"}},
			},
		}}
		return u
	}
	classObject := &graph.Object{ObjectRef: graph.ObjectRef{GVK: schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}}}
	machineObject := &graph.Object{ObjectRef: graph.ObjectRef{GVK: schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}}}

	t.Run("a ClusterClass reconciled at its generation gives its status, with generations mapped to the copy's", func(t *testing.T) {
		got := reconciledStatus(classObject, class(3, 3), 1)
		// The condition that observed generation 1 of the source observed
		// none of the copy's: its observedGeneration goes.
		want := map[string]any{
			"observedGeneration": int64(1),
			"conditions": []any{
				map[string]any{"type": "VariablesReady", "status": "True", "observedGeneration": int64(1)},
				map[string]any{"type": "Other", "status": "True"},
			},
			"variables": []any{map[string]any{"name": "v"}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status differs (-want +got):\n%s", diff)
		}
	})
	t.Run("the source's status is not changed", func(t *testing.T) {
		src := class(3, 3)
		reconciledStatus(classObject, src, 1)
		if g, _, _ := unstructured.NestedInt64(src.Object, "status", "observedGeneration"); g != 3 {
			t.Errorf("source observedGeneration became %d", g)
		}
	})
	t.Run("a ClusterClass not reconciled at its generation gives nothing", func(t *testing.T) {
		if got := reconciledStatus(classObject, class(3, 2), 1); got != nil {
			t.Errorf("status %v, want none", got)
		}
	})
	t.Run("other kinds give nothing", func(t *testing.T) {
		if got := reconciledStatus(machineObject, class(3, 3), 1); got != nil {
			t.Errorf("status %v, want none", got)
		}
	})
}

func TestIsOurCopy(t *testing.T) {
	withManager := func(uid types.UID, manager string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{UID: uid, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate}}}
	}
	recorded := map[types.UID]bool{"restored": true}
	for _, tc := range []struct {
		name     string
		existing *metav1.ObjectMeta
		want     bool
	}{
		{"created by the operation, managed fields not restored yet", withManager("new", FieldOwner("op-1")), true},
		{"managed fields restored, recorded as the operation's copy", withManager("restored", "capi-topology"), true},
		{"created by another operation", withManager("other", FieldOwner("op-2")), false},
		{"there before, or made by somebody else", withManager("theirs", "kubectl"), false},
		{"no managed fields at all", &metav1.ObjectMeta{UID: "bare"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsCopyOf(tc.existing, "op-1", recorded); got != tc.want {
				t.Errorf("IsCopyOf = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestMapGenerationsPointsWhatObservedTheSourcesGenerationAtTheCopysAndDropsOlderObservations(t *testing.T) {
	status := map[string]any{
		"observedGeneration": int64(4),
		"conditions": []any{
			map[string]any{"type": "Ready", "observedGeneration": int64(4)},
			map[string]any{"type": "Stale", "observedGeneration": int64(3)},
			map[string]any{"type": "Unobserved"},
		},
		"v1beta2": map[string]any{"conditions": []any{map[string]any{"type": "Available", "observedGeneration": int64(4)}}},
		"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "observedGeneration": int64(2)},
		}}},
	}
	mapGenerations(status, 4, 1)
	want := map[string]any{
		"observedGeneration": int64(1),
		"conditions": []any{
			map[string]any{"type": "Ready", "observedGeneration": int64(1)},
			map[string]any{"type": "Stale"},
			map[string]any{"type": "Unobserved"},
		},
		"v1beta2":    map[string]any{"conditions": []any{map[string]any{"type": "Available", "observedGeneration": int64(1)}}},
		"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{map[string]any{"type": "Ready"}}}},
	}
	if diff := cmp.Diff(want, status); diff != "" {
		t.Errorf("status differs (-want +got):\n%s", diff)
	}

	stale := map[string]any{"observedGeneration": int64(2), "phase": "Provisioned"}
	mapGenerations(stale, 3, 1)
	if diff := cmp.Diff(map[string]any{"phase": "Provisioned"}, stale); diff != "" {
		t.Errorf("a status that observed an older generation (-want +got):\n%s", diff)
	}
}

func TestToTargetUIDsRewritesWholeMovedUIDsInPlaceAndAgainAfterAPartialRewrite(t *testing.T) {
	ctx := context.Background()
	moveLabel := map[string]string{graph.MoveLabel: ""}
	source := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "a-uid", Labels: moveLabel}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b-uid", Labels: moveLabel}},
	).Build()
	c := NewCopier(source, fake.NewClientBuilder().Build(), configMapPlan(t, ctx, source), "op", Options{})
	c.uids.record("a-uid", "a-copy")

	status := map[string]any{
		"consumerRef": map[string]any{"uid": "a-uid", "name": "a"},
		"named":       []any{"a-uid", "foreign-uid", "prefix/a-uid", map[string]any{"uid": "a-uid"}},
		"count":       int64(3),
	}
	want := map[string]any{
		"consumerRef": map[string]any{"uid": "a-copy", "name": "a"},
		"named":       []any{"a-copy", "foreign-uid", "prefix/a-uid", map[string]any{"uid": "a-copy"}},
		"count":       int64(3),
	}
	for _, attempt := range []string{"first", "retried"} {
		if err := c.toTargetUIDs(ctx, status); err != nil {
			t.Fatalf("%s rewrite: %v", attempt, err)
		}
		if diff := cmp.Diff(want, status); diff != "" {
			t.Errorf("%s rewrite (-want +got):\n%s", attempt, diff)
		}
	}

	// b has no copy yet: the rewrite fails and says why, having rewritten
	// what it could; a retry once b is copied finishes it.
	partial := map[string]any{"refs": []any{"a-uid", "b-uid"}}
	err := c.toTargetUIDs(ctx, partial)
	if err == nil || !strings.Contains(err.Error(), "not in the target yet") {
		t.Fatalf("a status naming a moved object without a copy: %v, want an error saying it is not in the target yet", err)
	}
	c.uids.record("b-uid", "b-copy")
	if err := c.toTargetUIDs(ctx, partial); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"refs": []any{"a-copy", "b-copy"}}, partial); diff != "" {
		t.Errorf("after the retry (-want +got):\n%s", diff)
	}
}
