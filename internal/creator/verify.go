package creator

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PolicyProblem is what Verify finds wrong with the policy: a person must
// act (install it again, create the MoveOperation again).
type PolicyProblem struct{ message string }

func (p *PolicyProblem) Error() string { return p.message }

func problem(format string, args ...any) error {
	return &PolicyProblem{message: fmt.Sprintf(format, args...)}
}

// Verify makes sure the source admits MoveOperations through the policy
// named name as the operator ships it, so that the created-by annotations
// of a MoveOperation created at created can be trusted: the policy holds
// every check of Validations and fails closed, a binding denies with it
// for every MoveOperation, and both were there before the MoveOperation
// (one created later never saw it). It returns nil, or an error that says
// what is wrong and what to do (a *PolicyProblem), or the error of a read
// that failed.
func Verify(ctx context.Context, c client.Reader, name string, created metav1.Time) error {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return problem("the ValidatingAdmissionPolicy %s, which admits a MoveOperation only if its creator may do what it moves, is not installed in the source; apply dist/install.yaml again and create the MoveOperation again", name)
		}
		return err
	}
	if why := differs(p); why != "" {
		return problem("the ValidatingAdmissionPolicy %s is not the one this operator ships (%s); apply dist/install.yaml of this version again and create the MoveOperation again", name, why)
	}
	if created.Before(&p.CreationTimestamp) {
		return problem("the ValidatingAdmissionPolicy %s was installed after the MoveOperation was created, so it never checked its creator; create the MoveOperation again", name)
	}
	bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	if err := c.List(ctx, bindings); err != nil {
		return fmt.Errorf("listing ValidatingAdmissionPolicyBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if denies(b, name) && !created.Before(&b.CreationTimestamp) {
			return nil
		}
	}
	return problem("no ValidatingAdmissionPolicyBinding older than the MoveOperation binds the ValidatingAdmissionPolicy %s to every MoveOperation with validationActions [Deny]; apply dist/install.yaml again and create the MoveOperation again", name)
}

// differs says how an installed policy falls short of Policy(): a check
// missing or changed, or a failure policy that would admit when a check
// cannot run. Fields the API server defaults are not compared.
func differs(installed *admissionregistrationv1.ValidatingAdmissionPolicy) string {
	if fp := installed.Spec.FailurePolicy; fp != nil && *fp != admissionregistrationv1.Fail {
		return "its failurePolicy is " + string(*fp) + ", not Fail"
	}
	want, _ := Policy()
	if !slices.EqualFunc(installed.Spec.Variables, want.Spec.Variables, func(a, b admissionregistrationv1.Variable) bool { return a == b }) {
		return "its variables differ"
	}
	have := map[string]bool{}
	for _, v := range installed.Spec.Validations {
		have[v.Expression] = true
	}
	for i, v := range want.Spec.Validations {
		if !have[v.Expression] {
			return fmt.Sprintf("validation %d of the shipped policy is missing or changed", i)
		}
	}
	if installed.Spec.MatchConstraints == nil || !matchesCreate(installed.Spec.MatchConstraints) {
		return "it does not match the creation of MoveOperations"
	}
	return ""
}

func matchesCreate(m *admissionregistrationv1.MatchResources) bool {
	if m.NamespaceSelector != nil && len(m.NamespaceSelector.MatchLabels)+len(m.NamespaceSelector.MatchExpressions) > 0 {
		return false
	}
	if m.ObjectSelector != nil && len(m.ObjectSelector.MatchLabels)+len(m.ObjectSelector.MatchExpressions) > 0 {
		return false
	}
	want := matchCreatorResources(admissionregistrationv1.Create).ResourceRules[0]
	for _, r := range m.ResourceRules {
		if slices.Contains(r.Operations, admissionregistrationv1.Create) && slices.Equal(r.APIGroups, want.APIGroups) &&
			slices.Equal(r.Resources, want.Resources) && slices.Contains(r.APIVersions, "*") && len(r.ResourceNames) == 0 {
			return len(m.ExcludeResourceRules) == 0
		}
	}
	return false
}

// denies reports whether a binding applies policy name to every
// MoveOperation and denies what it refuses.
func denies(b admissionregistrationv1.ValidatingAdmissionPolicyBinding, name string) bool {
	if b.Spec.PolicyName != name || !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) || b.Spec.ParamRef != nil {
		return false
	}
	m := b.Spec.MatchResources
	if m == nil {
		return true
	}
	empty := func(s *metav1.LabelSelector) bool {
		return s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0
	}
	return empty(m.NamespaceSelector) && empty(m.ObjectSelector) && len(m.ResourceRules) == 0 && len(m.ExcludeResourceRules) == 0
}
