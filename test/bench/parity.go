package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterClassKind is the one kind whose status the operator's default
// move (spec.objectStatusPolicy Rebuild) writes to its copies, when the source was
// reconciled at its generation: the Cluster webhook waits for it.
var clusterClassKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "ClusterClass"}

// parityWrites are the writes the parity floor makes to each copy after
// its create, the ones a faithful move cannot fold into the create: the
// status through the status subresource where the move carries it, then
// the source's managed fields, which the API server keeps only from a
// write that changes nothing else. The requests are the bench's own, made
// as internal/move makes them (one merge PATCH each, naming the copy's
// UID), without the operator's records, retries or waiting.
type parityWrites struct {
	// carry writes the status of every kind with a status subresource, as
	// the operator's move with spec.objectStatusPolicy Carry does (-carry); without
	// it only a reconciled ClusterClass's, as its default move does.
	carry bool
	// statusSubresource are the kinds that have one.
	statusSubresource map[schema.GroupKind]bool
}

// finish makes the writes after o's copy cp was created in the target.
// uids maps the source UIDs of the objects copied so far to their copies'.
func (p *parityWrites) finish(ctx context.Context, tgt client.Client, o, cp *unstructured.Unstructured, uids func(types.UID) (types.UID, bool)) error {
	if status := p.statusToWrite(o, cp.GetGeneration(), uids); status != nil {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": cp.GetUID()}, "status": status})
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(o.GroupVersionKind())
		obj.SetNamespace(o.GetNamespace())
		obj.SetName(o.GetName())
		if err := tgt.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("writing the status of %s %s/%s in the target: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	fields := restoredManagedFields(o, uids)
	if len(fields) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": cp.GetUID(), "managedFields": fields}})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(o.GroupVersionKind())
	obj.SetNamespace(o.GetNamespace())
	obj.SetName(o.GetName())
	if err := tgt.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("restoring the managed fields of %s %s/%s in the target: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// statusToWrite is the status the copy of o gets, or nil: with carry, the
// source's status of a kind with a status subresource; otherwise a
// ClusterClass's reconciled at its generation. Every observedGeneration
// that observed the source's generation observes the copy's
// (targetGeneration), the others are dropped, and every string that is the
// source UID of a copied object is its copy's UID, as the operator writes
// it.
func (p *parityWrites) statusToWrite(o *unstructured.Unstructured, targetGeneration int64, uids func(types.UID) (types.UID, bool)) map[string]any {
	status, ok := o.Object["status"].(map[string]any)
	if !ok || len(status) == 0 {
		return nil
	}
	gk := o.GroupVersionKind().GroupKind()
	switch {
	case p.carry && p.statusSubresource[gk]:
	case gk == clusterClassKind:
		if observed, _, _ := unstructured.NestedInt64(status, "observedGeneration"); observed != o.GetGeneration() || targetGeneration == 0 {
			return nil
		}
	default:
		return nil
	}
	mapped, _ := rewriteStatus(runtime.DeepCopyJSONValue(status), o.GetGeneration(), targetGeneration, uids).(map[string]any)
	return mapped
}

// rewriteStatus rewrites v in place for the copy: the generations it
// observed and the UIDs it names, at any depth.
func rewriteStatus(v any, sourceGeneration, targetGeneration int64, uids func(types.UID) (types.UID, bool)) any {
	switch v := v.(type) {
	case map[string]any:
		for k, item := range v {
			if k == "observedGeneration" {
				if g, ok := item.(int64); ok && g == sourceGeneration && targetGeneration > 0 {
					v[k] = targetGeneration
				} else {
					delete(v, k)
				}
				continue
			}
			v[k] = rewriteStatus(item, sourceGeneration, targetGeneration, uids)
		}
		return v
	case []any:
		for i, item := range v {
			v[i] = rewriteStatus(item, sourceGeneration, targetGeneration, uids)
		}
		return v
	case string:
		if uid, ok := uids(types.UID(v)); ok {
			return string(uid)
		}
		return v
	}
	return v
}

// restoredManagedFields are o's managed fields as its copy gets them: the
// owner references their field paths name by the owners' source UIDs
// (f:metadata → f:ownerReferences → k:{"uid":"..."}) named by their copies'
// UIDs. Every owner of a baseline's object moves (ownershipGroups refuses
// others), so no path is dropped.
func restoredManagedFields(o *unstructured.Unstructured, uids func(types.UID) (types.UID, bool)) []metav1.ManagedFieldsEntry {
	entries := o.GetManagedFields()
	var replace []string
	for _, ref := range o.GetOwnerReferences() {
		if to, ok := uids(ref.UID); ok {
			replace = append(replace, string(ref.UID), string(to))
		}
	}
	if len(replace) == 0 {
		return entries
	}
	r := strings.NewReplacer(replace...)
	for i, e := range entries {
		if e.FieldsV1 == nil || len(e.FieldsV1.GetRawBytes()) == 0 {
			continue
		}
		entries[i].FieldsV1 = metav1.NewFieldsV1(r.Replace(e.FieldsV1.GetRawString()))
	}
	return entries
}
