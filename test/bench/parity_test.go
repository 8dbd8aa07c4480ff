package main

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// copies maps the source UIDs of copied objects to their copies'.
func copies(m map[types.UID]types.UID) func(types.UID) (types.UID, bool) {
	return func(u types.UID) (types.UID, bool) {
		v, ok := m[u]
		return v, ok
	}
}

var machineKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}

// sourceObject is a source object of a kind at generation 3 with a status
// that observed it, names the Cluster by UID, and has a condition that
// observed an older generation.
func sourceObject(kind string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
		"metadata": map[string]any{"namespace": "ns", "name": "m", "uid": "src-m", "generation": int64(3)},
		"status": map[string]any{
			"observedGeneration": int64(3),
			"clusterUID":         "src-cluster",
			"providerID":         "loop://src-cluster",
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(3)},
				map[string]any{"type": "Old", "status": "True", "observedGeneration": int64(2)},
			},
		},
	}}
	return o
}

func TestTheParityFloorWritesTheStatusWhereTheOperatorsMoveCarriesIt(t *testing.T) {
	uids := copies(map[types.UID]types.UID{"src-cluster": "tgt-cluster"})
	withSubresource := map[schema.GroupKind]bool{machineKind: true, clusterClassKind: true}
	mapped := map[string]any{
		"observedGeneration": int64(1),
		"clusterUID":         "tgt-cluster",
		// A UID inside a longer string is left as it is, as the operator
		// leaves it.
		"providerID": "loop://src-cluster",
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(1)},
			map[string]any{"type": "Old", "status": "True"},
		},
	}
	unreconciledClass := sourceObject("ClusterClass")
	unreconciledClass.Object["status"].(map[string]any)["observedGeneration"] = int64(2)
	cases := []struct {
		name  string
		carry bool
		o     *unstructured.Unstructured
		want  map[string]any
	}{
		{"Rebuild writes no Machine's status", false, sourceObject("Machine"), nil},
		{"Rebuild writes a reconciled ClusterClass's status", false, sourceObject("ClusterClass"), mapped},
		{"Rebuild writes no status of a ClusterClass not reconciled at its generation", false, unreconciledClass, nil},
		{"Carry writes a Machine's status", true, sourceObject("Machine"), mapped},
		{"Carry writes no status of a kind without a status subresource", true, sourceObject("MachineSet"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &parityWrites{carry: c.carry, statusSubresource: withSubresource}
			got := p.statusToWrite(c.o, 1, uids)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("status written\n%v\nwant\n%v", got, c.want)
			}
		})
	}
	t.Run("the source object is left as it was", func(t *testing.T) {
		o := sourceObject("Machine")
		(&parityWrites{carry: true, statusSubresource: withSubresource}).statusToWrite(o, 1, uids)
		if !reflect.DeepEqual(o, sourceObject("Machine")) {
			t.Errorf("the source object changed:\n%v", o.Object)
		}
	})
}

func TestTheParityFloorRestoresTheManagedFieldsWithTheOwnersCopiesUIDs(t *testing.T) {
	o := sourceObject("Machine")
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "ms", UID: "src-ms"}})
	o.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "capi", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"src-ms\"}":{}}}}`)},
		{Manager: "status", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:phase":{}}}`)},
	})
	got := restoredManagedFields(o, copies(map[types.UID]types.UID{"src-ms": "tgt-ms"}))
	want := []string{`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"tgt-ms\"}":{}}}}`, `{"f:status":{"f:phase":{}}}`}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].FieldsV1.GetRawString() != want[i] || got[i].Manager != o.GetManagedFields()[i].Manager {
			t.Errorf("entry %d: %s %s, want %s %s", i, got[i].Manager, got[i].FieldsV1.GetRawString(), o.GetManagedFields()[i].Manager, want[i])
		}
	}
}
