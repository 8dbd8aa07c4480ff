package planrecord

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/move-operator/move-operator/internal/graph"
)

func testPlan(n int) *graph.Plan {
	kinds := []schema.GroupVersionKind{
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
		{Version: "v1", Kind: "Secret"},
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "LoopClusterIdentity"},
	}
	groups := make([][]*graph.Object, 3)
	for i := range n {
		g := i % 3
		o := &graph.Object{
			ObjectRef: graph.ObjectRef{GVK: kinds[g], Namespace: "ns", Name: fmt.Sprintf("o-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Group:     g, Delete: true,
		}
		if g == 2 {
			o.Namespace, o.Global, o.Delete, o.KeepReason, o.FoundInTarget = "", true, false, "global", i%2 == 0
		}
		if i%7 == 0 {
			o.InGlobalHierarchy = true
		}
		groups[g] = append(groups[g], o)
	}
	return graph.NewPlan(groups)
}

func roundTrip(t *testing.T, parts [][]byte) *graph.Plan {
	t.Helper()
	r := newReader()
	for _, p := range parts {
		if err := r.decode(p); err != nil {
			t.Fatalf("decode: %v", err)
		}
	}
	return r.plan()
}

func TestARecordReadsBackAsThePlan(t *testing.T) {
	defer func(n int) { objectsPerPart = n }(objectsPerPart)
	for _, perPart := range []int{10000, 7} {
		t.Run(fmt.Sprintf("%d objects per part", perPart), func(t *testing.T) {
			objectsPerPart = perPart
			plan := testPlan(50)
			parts, err := encode(plan)
			if err != nil {
				t.Fatal(err)
			}
			if want := (50 + perPart - 1) / perPart; len(parts) != want {
				t.Errorf("%d parts, want %d", len(parts), want)
			}
			if diff := cmp.Diff(plan.Groups, roundTrip(t, parts).Groups); diff != "" {
				t.Errorf("the plan read back differs (-recorded +read):\n%s", diff)
			}
		})
	}
	t.Run("an empty plan is one part", func(t *testing.T) {
		parts, err := encode(graph.NewPlan(nil))
		if err != nil || len(parts) != 1 {
			t.Fatalf("encode: %d parts, %v", len(parts), err)
		}
		if got := roundTrip(t, parts); got.Len() != 0 {
			t.Errorf("read back %d objects, want none", got.Len())
		}
	})
	t.Run("the namespaces a plan requires with nothing in them read back", func(t *testing.T) {
		objectsPerPart = 7
		plan := testPlan(20)
		plan.RequireNamespaces([]string{"empty-b", "ns", "empty-a"})
		parts, err := encode(plan)
		if err != nil {
			t.Fatal(err)
		}
		got := roundTrip(t, parts)
		if diff := cmp.Diff([]string{"empty-a", "empty-b", "ns"}, got.RequiredNamespaces()); diff != "" {
			t.Errorf("required namespaces read back differ (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"empty-a", "empty-b", "ns"}, got.Namespaces()); diff != "" {
			t.Errorf("the namespaces the target must have differ (-want +got):\n%s", diff)
		}
	})
	t.Run("the versions the target stores converted kinds at read back, and say where to write each object", func(t *testing.T) {
		objectsPerPart = 7
		plan := testPlan(20)
		cluster := schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}
		plan.SetTargetVersions(map[schema.GroupKind]string{cluster: "v1beta3"})
		parts, err := encode(plan)
		if err != nil {
			t.Fatal(err)
		}
		got := roundTrip(t, parts)
		if diff := cmp.Diff(map[schema.GroupKind]string{cluster: "v1beta3"}, got.TargetVersions()); diff != "" {
			t.Errorf("target versions read back differ (-want +got):\n%s", diff)
		}
		for _, o := range got.Objects() {
			want := o.GVK
			if o.GroupKind() == cluster {
				want.Version = "v1beta3"
			}
			if to := got.TargetGVK(o.GVK); to != want {
				t.Errorf("%s is written to the target at %s, want %s", o, to, want)
			}
		}
	})
	t.Run("a record written before target versions were recorded reads back with every kind at its own version", func(t *testing.T) {
		// As an operator without them wrote it: no targetVersions key.
		old, err := compress(part{Kinds: []string{"cluster.x-k8s.io/v1beta2/Cluster"}, Objects: []entry{{Kind: 0, Namespace: "ns", Name: "c", UID: "uid-c"}}})
		if err != nil {
			t.Fatal(err)
		}
		got := roundTrip(t, [][]byte{old})
		if n := len(got.TargetVersions()); n != 0 {
			t.Errorf("%d target versions read from a record without any", n)
		}
		o := got.Objects()[0]
		if to := got.TargetGVK(o.GVK); to != o.GVK {
			t.Errorf("%s is written to the target at %s, want its own %s", o, to, o.GVK)
		}
	})
	t.Run("a large plan stays small", func(t *testing.T) {
		objectsPerPart = 10000
		parts, err := encode(testPlan(45000))
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range parts {
			if len(p) > 512*1024 {
				t.Errorf("part %d takes %d bytes, more than half the size limit of a ConfigMap", i, len(p))
			}
		}
	})
}

func TestARecordIsCompleteWhenEveryPartIsThere(t *testing.T) {
	part := func(i, n int) corev1.ConfigMap {
		return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			partAnnotation: fmt.Sprint(i), partsAnnotation: fmt.Sprint(n),
		}}}
	}
	for _, tc := range []struct {
		name  string
		parts []corev1.ConfigMap
		want  bool
	}{
		{"none", nil, false},
		{"one of one", []corev1.ConfigMap{part(0, 1)}, true},
		{"all of three, any order", []corev1.ConfigMap{part(2, 3), part(0, 3), part(1, 3)}, true},
		{"two of three (a crash while writing)", []corev1.ConfigMap{part(0, 3), part(1, 3)}, false},
		{"a part twice", []corev1.ConfigMap{part(0, 2), part(0, 2)}, false},
		{"parts of two records of different sizes", []corev1.ConfigMap{part(0, 2), part(1, 3)}, false},
		{"an index out of range", []corev1.ConfigMap{part(0, 2), part(2, 2)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := complete(tc.parts); got != tc.want {
				t.Errorf("complete = %t, want %t", got, tc.want)
			}
		})
	}
}
