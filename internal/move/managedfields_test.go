package move

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestRewriteOwnerUIDs(t *testing.T) {
	// Source UIDs of owners that move, and their target UIDs; "stays-uid"
	// is an owner that does not move, and the target UID of
	// "unreadable-uid" cannot be read.
	moved := map[types.UID]types.UID{"ms-source-uid": "ms-target-uid", "cluster-source-uid": "cluster-target-uid"}
	unreadable := errors.New("unreachable")
	target := func(uid types.UID) (types.UID, bool, error) {
		if uid == "unreadable-uid" {
			return "", false, unreadable
		}
		to, ok := moved[uid]
		return to, ok, nil
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "cluster.x-k8s.io/v1beta2", FieldsType: "FieldsV1"}
		if fields != "" {
			e.FieldsV1 = metav1.NewFieldsV1(fields)
		}
		return e
	}
	// fieldsOf parses the fields of every entry, so that key order does not matter.
	fieldsOf := func(t *testing.T, entries []metav1.ManagedFieldsEntry) []any {
		t.Helper()
		var out []any
		for _, e := range entries {
			var f any
			if e.FieldsV1 != nil {
				if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &f); err != nil {
					t.Fatalf("fields of %s: %v", e.Manager, err)
				}
			}
			out = append(out, map[string]any{"manager": e.Manager, "operation": string(e.Operation), "fields": f})
		}
		return out
	}

	tests := []struct {
		name      string
		in, want  []metav1.ManagedFieldsEntry
		unchanged bool
	}{
		{
			name: "the UID of a moved owner is replaced by its target UID, in every manager's entry",
			in: []metav1.ManagedFieldsEntry{
				entry("capi-topology", metav1.ManagedFieldsOperationApply,
					`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"ms-source-uid\"}":{}}},"f:spec":{"f:clusterName":{}}}`),
				entry("manager", metav1.ManagedFieldsOperationUpdate,
					`{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"cluster-source-uid\"}":{".":{},"f:kind":{}}}}}`),
			},
			want: []metav1.ManagedFieldsEntry{
				entry("capi-topology", metav1.ManagedFieldsOperationApply,
					`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"ms-target-uid\"}":{}}},"f:spec":{"f:clusterName":{}}}`),
				entry("manager", metav1.ManagedFieldsOperationUpdate,
					`{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"cluster-target-uid\"}":{".":{},"f:kind":{}}}}}`),
			},
		},
		{
			name: "the path of an owner that does not move is dropped, and parents it leaves empty with it",
			in: []metav1.ManagedFieldsEntry{
				entry("a", metav1.ManagedFieldsOperationApply,
					`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"stays-uid\"}":{}}},"f:spec":{"f:clusterName":{}}}`),
				entry("b", metav1.ManagedFieldsOperationUpdate,
					`{"f:metadata":{"f:labels":{"f:x":{}},"f:ownerReferences":{"k:{\"uid\":\"stays-uid\"}":{},"k:{\"uid\":\"ms-source-uid\"}":{}}}}`),
			},
			want: []metav1.ManagedFieldsEntry{
				entry("a", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:clusterName":{}}}`),
				entry("b", metav1.ManagedFieldsOperationUpdate,
					`{"f:metadata":{"f:labels":{"f:x":{}},"f:ownerReferences":{"k:{\"uid\":\"ms-target-uid\"}":{}}}}`),
			},
		},
		{
			name: "an entry that managed only owners that do not move is dropped",
			in: []metav1.ManagedFieldsEntry{
				entry("gone", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"stays-uid\"}":{}}}}`),
				entry("kept", metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`),
			},
			want: []metav1.ManagedFieldsEntry{entry("kept", metav1.ManagedFieldsOperationUpdate, `{"f:data":{}}`)},
		},
		{
			name: "entries that name no owner are returned as they are, times and subresources included",
			in: []metav1.ManagedFieldsEntry{
				{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{},
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:phase":{}}}`)},
				entry("empty", metav1.ManagedFieldsOperationUpdate, ""),
			},
			unchanged: true,
		},
		{
			name: "keys of other lists are left alone",
			in: []metav1.ManagedFieldsEntry{
				entry("m", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:items":{"k:{\"uid\":\"stays-uid\"}":{}}}}`),
			},
			unchanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rewriteOwnerUIDs(tt.in, target)
			if err != nil {
				t.Fatal(err)
			}
			if tt.unchanged {
				if diff := cmp.Diff(tt.in, got); diff != "" {
					t.Errorf("entries changed (-in +got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(fieldsOf(t, tt.want), fieldsOf(t, got)); diff != "" {
				t.Errorf("rewritten entries differ (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("the source's entries are not changed", func(t *testing.T) {
		raw := `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"ms-source-uid\"}":{}}}}`
		in := []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationApply, raw)}
		if _, err := rewriteOwnerUIDs(in, target); err != nil {
			t.Fatal(err)
		}
		if string(in[0].FieldsV1.GetRawBytes()) != raw {
			t.Errorf("the source entry became %s", in[0].FieldsV1.GetRawBytes())
		}
	})

	t.Run("an owner whose target UID cannot be read fails the rewrite", func(t *testing.T) {
		in := []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"unreadable-uid\"}":{}}}}`)}
		_, err := rewriteOwnerUIDs(in, target)
		if !errors.Is(err, unreadable) {
			t.Errorf("error %v, want it to wrap %v", err, unreadable)
		}
	})
}
