package quiesce

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWithBypass(t *testing.T) {
	bypass := metav1.LabelSelectorRequirement{Key: "move.cluster.x-k8s.io/operation", Operator: metav1.LabelSelectorOpDoesNotExist}
	cases := []struct {
		name string
		in   *metav1.LabelSelector
		want *metav1.LabelSelector
	}{
		{
			name: "a webhook without selector gets only the bypass",
			in:   nil,
			want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{bypass}},
		},
		{
			name: "an empty selector gets only the bypass",
			in:   &metav1.LabelSelector{},
			want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{bypass}},
		},
		{
			name: "a selector keeps its labels and expressions, and the bypass is ANDed",
			in: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"tier": "infra"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}},
			},
			want: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"tier": "infra"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}, bypass},
			},
		},
		{
			name: "a selector that has the bypass already is left as it is",
			in:   &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{bypass}},
			want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{bypass}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			got := WithBypass(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WithBypass() mismatch (-want +got):\n%s", diff)
			}
			if !HasBypass(got) {
				t.Errorf("HasBypass(WithBypass(x)) = false")
			}
			if diff := cmp.Diff(before, tc.in); diff != "" {
				t.Errorf("WithBypass changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestHasBypassIgnoresOtherRequirementsOnTheLabel(t *testing.T) {
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "move.cluster.x-k8s.io/operation", Operator: metav1.LabelSelectorOpExists,
	}}}
	if HasBypass(sel) {
		t.Fatal("an Exists requirement on the operation label is not the bypass")
	}
}

func TestGroupByConfigurationKeepsKindsApart(t *testing.T) {
	refs := []WebhookRef{
		{Kind: Validating, Configuration: "capi", Webhook: "a"},
		{Kind: Mutating, Configuration: "capi", Webhook: "a"},
		{Kind: Validating, Configuration: "capi", Webhook: "b"},
	}
	groups := groupByConfiguration(refs)
	if len(groups) != 2 {
		t.Fatalf("want 2 groups (validating and mutating capi), got %d: %+v", len(groups), groups)
	}
	if !groups[0].webhooks["a"] || !groups[0].webhooks["b"] || groups[0].kind != Validating {
		t.Errorf("validating group = %+v, want webhooks a and b", groups[0])
	}
	if !groups[1].webhooks["a"] || groups[1].webhooks["b"] || groups[1].kind != Mutating {
		t.Errorf("mutating group = %+v, want webhook a only", groups[1])
	}
}
