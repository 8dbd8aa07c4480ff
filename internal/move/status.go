package move

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// CarryStatus makes the Copier write the source's status to the copy of
// every object of the kinds carry reports (those with a status
// subresource in the target; see graph.Type.StatusSubresource), for a move
// with spec.objectStatusPolicy Carry. Without it, only a ClusterClass reconciled at its
// generation gets its status (see reconciledStatus), as a move that
// rebuilds status needs.
//
// The status is written through the status subresource, after the copy
// exists with its owners and before its managed fields are restored (a
// status write adds the operation's entry, which the restore then takes
// away). Generations are mapped to the copy's (see mapGenerations), and
// every string in the status that is the source UID of a moved object is
// the UID of that object's copy: such a status names the object as owner
// references do. A status that names an object of a later group waits for
// it (see finishWaiting). Objects used as found (global objects the target
// had) keep the target's status.
func (c *Copier) CarryStatus(carry func(schema.GroupKind) bool) *Copier {
	c.carry = carry
	return c
}

// StatusSubresources returns which kinds of ts write their status through
// a subresource: the kinds whose status CarryStatus carries. The kinds
// without one keep whatever status a create gives them, so their copies
// have the source's status already.
func StatusSubresources(ts *graph.Types) func(schema.GroupKind) bool {
	return func(gk schema.GroupKind) bool {
		t, ok := ts.Lookup(gk)
		return ok && t.StatusSubresource
	}
}

// statusToCopy returns the status to write to o's copy, UIDs still the
// source's, or nil for none: the source's status when the move carries
// the kind's, a reconciled ClusterClass's otherwise. src is the source
// object at the target's version (converted, when the target stores the
// kind at another version: the status is converted with it).
// targetGeneration is the copy's generation.
func (c *Copier) statusToCopy(o *graph.Object, src *unstructured.Unstructured, targetGeneration int64) map[string]any {
	if c.carry == nil || !c.carry(o.GroupKind()) {
		return reconciledStatus(o, src, targetGeneration)
	}
	status, ok := src.Object["status"].(map[string]any)
	if !ok || len(status) == 0 {
		return nil
	}
	mapped := runtime.DeepCopyJSONValue(status).(map[string]any)
	mapGenerations(mapped, src.GetGeneration(), targetGeneration)
	return mapped
}

// reconciledStatus returns the status to give the target copy of a
// ClusterClass, or nil. The Cluster admission webhook validates a topology
// fully only against a ClusterClass whose status says it was reconciled at
// its current generation, and otherwise polls for it for two seconds on
// every create and update of a Cluster that uses it (and may then refuse
// it). A copy is created without status, at generation 1, with the same
// spec the source's status describes; so when the source was reconciled at
// its own generation, the copy gets that status with the generations
// mapped to its own. A source not reconciled gives nothing to copy.
func reconciledStatus(o *graph.Object, src *unstructured.Unstructured, targetGeneration int64) map[string]any {
	if o.GroupKind() != graph.ClusterClassGroupKind || targetGeneration == 0 {
		return nil
	}
	status, ok := src.Object["status"].(map[string]any)
	if !ok {
		return nil
	}
	if observed, _, _ := unstructured.NestedInt64(status, "observedGeneration"); observed != src.GetGeneration() {
		return nil
	}
	mapped := runtime.DeepCopyJSONValue(status).(map[string]any)
	mapGenerations(mapped, src.GetGeneration(), targetGeneration)
	return mapped
}

// conditionPaths are where statuses keep conditions with an
// observedGeneration of their own: v1beta2 conditions, the v1beta1 ones a
// v1beta2 object keeps under deprecated, and the v1beta2 ones a v1beta1
// object keeps ahead of its version.
var conditionPaths = [][]string{{"conditions"}, {"deprecated", "v1beta1", "conditions"}, {"v1beta2", "conditions"}}

// mapGenerations points the generations a status observed at the copy's:
// the copy has the spec the source had at sourceGeneration, at its own
// generation targetGeneration, so what observed the source's current
// generation observed the copy's. What observed an older one observed no
// generation of the copy: its observedGeneration is dropped, and the
// target's controllers take it as not reconciled yet.
func mapGenerations(status map[string]any, sourceGeneration, targetGeneration int64) {
	mapOne := func(m map[string]any) {
		observed, found, _ := unstructured.NestedInt64(m, "observedGeneration")
		switch {
		case !found:
		case observed == sourceGeneration && targetGeneration > 0:
			m["observedGeneration"] = targetGeneration
		default:
			delete(m, "observedGeneration")
		}
	}
	mapOne(status)
	for _, path := range conditionPaths {
		conditions, _, _ := unstructured.NestedSlice(status, path...)
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok {
				mapOne(m)
			}
		}
		if conditions != nil {
			_ = unstructured.SetNestedSlice(status, conditions, path...)
		}
	}
}

// waitsFor returns the last group holding a moved object that o's status
// names by UID and that has no copy yet (one of o's own group or a later
// one), or -1 when every object it names has one.
func (c *Copier) waitsFor(o *graph.Object, status map[string]any) int {
	last := -1
	eachString(status, func(s string) {
		named, moves := c.plan.Object(types.UID(s))
		if moves && !c.uids.known(named.UID) {
			last = max(last, named.Group, o.Group)
		}
	})
	return last
}

// copyStatus writes a status to the target copy of an object, through the
// status subresource, naming the copy's UID, with every source UID of a
// moved object in it replaced by its copy's.
func (c *Copier) copyStatus(ctx context.Context, o *graph.Object, uid types.UID, status map[string]any) error {
	if err := c.toTargetUIDs(ctx, status); err != nil {
		return fmt.Errorf("copying the status of %s to the target: %w", o.ObjectRef, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": status})
	if err != nil {
		return err
	}
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(c.plan.TargetGVK(o.GVK))
	target.SetNamespace(o.Namespace)
	target.SetName(o.Name)
	if err := retryTransient(ctx, func() error {
		return c.target.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
	}); err != nil {
		return fmt.Errorf("copying the status of %s to the target: %w", o.ObjectRef, err)
	}
	return nil
}

// toTargetUIDs replaces, in place, every string in a status that is the
// source UID of a moved object with that object's UID in the target. A
// UID inside a longer string (a provider ID that embeds one) is left as
// it is. In place, because the status is already the copy's own
// (statusToCopy deep-copies it); and a retry after a partial rewrite is
// safe, because a target UID is never a moved object's source UID, so
// what was rewritten stays as it is.
func (c *Copier) toTargetUIDs(ctx context.Context, status map[string]any) error {
	var rewrite func(v any) (any, error)
	rewrite = func(v any) (any, error) {
		switch v := v.(type) {
		case map[string]any:
			for k, item := range v {
				mapped, err := rewrite(item)
				if err != nil {
					return nil, err
				}
				v[k] = mapped
			}
		case []any:
			for i, item := range v {
				mapped, err := rewrite(item)
				if err != nil {
					return nil, err
				}
				v[i] = mapped
			}
		case string:
			named, moves := c.plan.Object(types.UID(v))
			if !moves {
				return v, nil
			}
			uid, err := c.uids.of(ctx, named)
			if err != nil {
				return nil, err
			}
			return string(uid), nil
		}
		return v, nil
	}
	_, err := rewrite(status)
	return err
}

// eachString calls f with every string in a JSON value.
func eachString(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for _, item := range v {
			eachString(item, f)
		}
	case []any:
		for _, item := range v {
			eachString(item, f)
		}
	case string:
		f(v)
	}
}
