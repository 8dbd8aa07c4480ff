package quiesce

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// bypassRequirement is what the bypass adds to a webhook's objectSelector:
// objects that carry the operation label (the objects in flight) are not
// sent to the webhook.
var bypassRequirement = metav1.LabelSelectorRequirement{
	Key:      movev1alpha1.OperationLabel,
	Operator: metav1.LabelSelectorOpDoesNotExist,
}

// HasBypass reports whether sel already excludes the objects in flight.
func HasBypass(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	for _, r := range sel.MatchExpressions {
		if r.Key == bypassRequirement.Key && r.Operator == bypassRequirement.Operator {
			return true
		}
	}
	return false
}

// WithBypass returns a copy of sel that also excludes the objects in flight.
// Requirements are ANDed, so the webhook still sees exactly the objects it saw
// before, less those the move labelled.
func WithBypass(sel *metav1.LabelSelector) *metav1.LabelSelector {
	out := sel.DeepCopy()
	if out == nil {
		out = &metav1.LabelSelector{}
	}
	if !HasBypass(out) {
		out.MatchExpressions = append(out.MatchExpressions, bypassRequirement)
	}
	return out
}
