package loopprovider

import (
	"context"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Condition reasons the loop kinds report.
const (
	ReadyReason          = "Ready"
	PoweredOffReason     = "PoweredOff"
	VMNotFoundReason     = "VMNotFound"
	WaitingForVMsReason  = "WaitingForVMs"
	readyConditionType   = "Ready"
	conditionTimeFormat  = time.RFC3339
	statusInitialization = "initialization"
)

// condition is a condition the controller wants set.
type condition struct {
	status, reason, message string
}

// patchStatus sets fields of obj's status and its Ready condition, keeping
// the condition's lastTransitionTime when its status does not change, and
// writes the status subresource only when something changed, as Cluster
// API's patch helper does.
func (b base) patchStatus(ctx context.Context, obj *unstructured.Unstructured, fields map[string]any, ready condition) error {
	before := obj.DeepCopy()
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	b.contractStatus(fields)
	for k, v := range fields {
		status[k] = v
	}
	status["conditions"] = setReady(status["conditions"], ready, obj.GetGeneration())
	if err := unstructured.SetNestedMap(obj.Object, status, "status"); err != nil {
		return fmt.Errorf("setting the status of %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	if reflect.DeepEqual(before.Object["status"], obj.Object["status"]) {
		return nil
	}
	if err := b.client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("writing the status of %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// setReady returns conds (an unstructured condition list) with the Ready
// condition set to c.
func setReady(conds any, c condition, generation int64) []any {
	const t = readyConditionType
	list, _ := conds.([]any)
	out := make([]any, 0, len(list)+1)
	now := metav1.Now().UTC().Truncate(time.Second).Format(conditionTimeFormat)
	found := false
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != t {
			out = append(out, item)
			continue
		}
		found = true
		next := map[string]any{
			"type": t, "status": c.status, "reason": c.reason,
			"observedGeneration": generation, "lastTransitionTime": m["lastTransitionTime"],
		}
		if c.message != "" {
			next["message"] = c.message
		}
		if m["status"] != c.status || m["lastTransitionTime"] == nil {
			next["lastTransitionTime"] = now
		}
		out = append(out, next)
	}
	if !found {
		next := map[string]any{
			"type": t, "status": c.status, "reason": c.reason,
			"observedGeneration": generation, "lastTransitionTime": now,
		}
		if c.message != "" {
			next["message"] = c.message
		}
		out = append(out, next)
	}
	return out
}

// ready is the Ready condition of a provisioned object.
func ready() condition { return condition{status: "True", reason: ReadyReason} }

func isFalse(reason, message string) condition {
	return condition{status: "False", reason: reason, message: message}
}
