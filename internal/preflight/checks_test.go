package preflight_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// The checks run in order, every one of them: a MoveOperation with several
// problems hears of all of them at once, and a check that needs what an
// earlier one could not learn (a target, a plan) stays quiet.
func TestEveryCheckRunsAndEveryFindingIsReportedInOrder(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	source := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}},
	).Build()
	connected := false
	e := &preflight.Env{
		Source: source,
		Spec: movev1alpha1.MoveOperationSpec{
			Namespaces:      []string{"fleet", "gone", "also-gone"},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}},
		},
		Connect: func(context.Context) (*remote.Target, error) {
			connected = true
			return nil, &remote.Error{Reason: movev1alpha1.ReasonTargetSecretNotFound, Message: "Secret ops/target not found"}
		},
	}
	// The checks of the input and the target need no more than a namespace
	// list; the creator's ask the API server's authorizer and the later
	// ones read CRDs, which the fake client does not serve.
	var checks []preflight.Check
	for _, c := range preflight.Checks() {
		if c.Name == "selectors" || c.Name == "namespaces" || c.Name == "target" {
			checks = append(checks, c)
		}
	}
	if err := preflight.Evaluate(context.Background(), e, checks); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range e.Findings {
		got = append(got, f.Check+":"+f.Reason)
	}
	want := []string{
		"selectors:" + movev1alpha1.ReasonInvalidSelector,
		"namespaces:" + movev1alpha1.ReasonNamespaceNotFound,
		"namespaces:" + movev1alpha1.ReasonNamespaceNotFound,
		"target:" + movev1alpha1.ReasonTargetSecretNotFound,
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("findings %v, want %v", got, want)
	}
	if !connected || e.Target != nil {
		t.Errorf("connected %v, target %v: the target is tried even when the input is wrong, and not kept when it cannot be used", connected, e.Target)
	}
	if !e.Findings[3].Retry || e.Findings[0].Retry {
		t.Errorf("a missing Secret is fixed outside the MoveOperation (Retry), a bad selector is not: %+v", e.Findings)
	}
	if !strings.Contains(e.Findings[2].Message, `"also-gone"`) {
		t.Errorf("each missing namespace is named: %q", e.Findings[2].Message)
	}
}

func TestChecksHaveDistinctNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range preflight.Checks() {
		if c.Name == "" || seen[c.Name] {
			t.Errorf("check name %q is empty or repeated", c.Name)
		}
		seen[c.Name] = true
	}
}
