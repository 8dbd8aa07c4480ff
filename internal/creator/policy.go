package creator

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Names of the admission policies in config/admission, before the
// installer's name prefix; PolicyName is the installed one, which the
// operator looks for by default.
const (
	ValidatingPolicyBaseName = "creator-rights"
	MutatingPolicyBaseName   = "created-by"
	InstallerPrefix          = "move-operator-"
	PolicyName               = InstallerPrefix + ValidatingPolicyBaseName
)

// The admission policy asks about the first NamespaceSlots namespaces of
// spec.namespaces one by one, and the first ControllerSlots Deployments of
// spec.controllers.additional; a longer list needs the right in every
// namespace. CEL allows two authorization checks per expression and about
// 28 per policy and request (each check costs 350,000 of a 1,000,000
// budget per expression and 10,000,000 per binding): at most 2*6 + 1 + 4
// + 1 + 3 = 21 checks run for any one MoveOperation.
const (
	NamespaceSlots  = 6
	ControllerSlots = 4
)

// The policy's variables.
const policyVariables = `creating=request.operation == 'CREATE'
restoring=has(object.spec.source)
namespaces=has(object.spec.namespaces) ? object.spec.namespaces : (has(object.spec.template) && has(object.spec.template.namespaces) ? object.spec.template.namespaces : [])
scaled=has(object.spec.controllers) && has(object.spec.controllers.additional) ? object.spec.controllers.additional.filter(c, !has(c.cluster) || c.cluster != 'Target') : []
providersOnly=!has(object.spec.controllers) || !has(object.spec.controllers.selector) || ((!has(object.spec.controllers.selector.matchLabels) || size(object.spec.controllers.selector.matchLabels) == 0) && has(object.spec.controllers.selector.matchExpressions) && size(object.spec.controllers.selector.matchExpressions) == 1 && object.spec.controllers.selector.matchExpressions[0].key == '` + movev1alpha1.DefaultControllerLabel + `' && object.spec.controllers.selector.matchExpressions[0].operator == 'Exists' && (!has(object.spec.controllers.selector.matchExpressions[0].values) || size(object.spec.controllers.selector.matchExpressions[0].values) == 0))
suspends=has(object.spec.gitOps) && object.spec.gitOps == 'Suspend'
annotations=has(object.metadata.annotations) ? object.metadata.annotations : {}
oldAnnotations=request.operation == 'UPDATE' && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}
groups=has(request.userInfo.groups) ? request.userInfo.groups.join('` + groupSeparator + `') : ''`

// Policy is the ValidatingAdmissionPolicy of config/admission, named
// without the installer's prefix, and its binding.
func Policy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingPolicyBaseName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: matchCreatorResources(admissionregistrationv1.Create, admissionregistrationv1.Update),
			Variables:        variables(),
			Validations:      Validations(),
		},
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingPolicyBaseName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ValidatingPolicyBaseName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return p, b
}

func matchCreatorResources(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{movev1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"moveoperations", "backupschedules"},
				},
			},
		}},
	}
}

func variables() []admissionregistrationv1.Variable {
	var out []admissionregistrationv1.Variable
	for line := range strings.Lines(policyVariables) {
		name, expr, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		out = append(out, admissionregistrationv1.Variable{Name: name, Expression: expr})
	}
	return out
}

// Validations are the policy's checks, in the order the API server runs
// them: who the creator is, then what the spec has the operator do.
func Validations() []admissionregistrationv1.Validation {
	out := identityValidations()
	for _, r := range perNamespace {
		out = append(out, everyNamespace(r))
	}
	for i := range NamespaceSlots {
		for _, r := range perNamespace {
			out = append(out, namespaceSlot(r, i))
		}
	}
	out = append(out, targetSecretValidation()...)
	out = append(out, controllerValidations()...)
	r := chooseControllers
	out = append(out, forbidden("!variables.creating || variables.providersOnly || "+r.check("", ""),
		fmt.Sprintf(`request.userInfo.username + ' may not %s %s at the cluster scope, and %s; leave spec.controllers.selector out (the providers), and name other Deployments in spec.controllers.additional'`, r.verb, groupResource(r.group, r.resource), escape(r.why))))
	for _, r := range suspendGitOps {
		out = append(out, forbidden("!variables.creating || !variables.suspends || "+r.check("", ""),
			fmt.Sprintf(`request.userInfo.username + ' may not %s %s at the cluster scope in this cluster, and %s; choose spec.gitOps Refuse or Ignore, or have someone who may create the MoveOperation'`, r.verb, groupResource(r.group, r.resource), escape(r.why))))
	}
	return out
}

// check is the CEL that asks the authorizer whether the requesting user may
// exercise r; namespace and name are CEL expressions ("" for none).
func (r right) check(namespace, name string) string {
	c := fmt.Sprintf("authorizer.group('%s').resource('%s')", r.group, r.resource)
	if namespace != "" {
		c += ".namespace(" + namespace + ")"
	}
	if name != "" {
		c += ".name(" + name + ")"
	}
	return c + fmt.Sprintf(".check('%s').allowed()", r.verb)
}

// escape makes s fit inside a single-quoted CEL string.
var escape = strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace

func forbidden(expression, message string) admissionregistrationv1.Validation {
	return admissionregistrationv1.Validation{Expression: expression, MessageExpression: message, Reason: ptr.To(metav1.StatusReasonForbidden)}
}

func identityValidations() []admissionregistrationv1.Validation {
	by, groups := movev1alpha1.CreatedByAnnotation, movev1alpha1.CreatedByGroupsAnnotation
	pinned := fmt.Sprintf(`!variables.creating || ('%[1]s' in variables.annotations && variables.annotations['%[1]s'] == request.userInfo.username && ('%[2]s' in variables.annotations ? variables.annotations['%[2]s'] : '') == variables.groups)`, by, groups)
	unchanged := fmt.Sprintf(`request.operation != 'UPDATE' || ['%s', '%s'].all(k, (k in variables.annotations ? variables.annotations[k] : '') == (k in variables.oldAnnotations ? variables.oldAnnotations[k] : ''))`, by, groups)
	return []admissionregistrationv1.Validation{
		forbidden(pinned, fmt.Sprintf(`'a MoveOperation names its creator, for the operator to check the move against their rights: set the annotation %s to "' + request.userInfo.username + '" and %s to "' + variables.groups + '" (your username and groups, as kubectl auth whoami shows them; on Kubernetes 1.36 and later the installer sets both for you)'`, by, groups)),
		forbidden(unchanged, fmt.Sprintf(`'the annotations %s and %s say who created the MoveOperation and cannot change'`, by, groups)),
	}
}

func everyNamespace(nr namespaceRight) admissionregistrationv1.Validation {
	slots := fmt.Sprint(NamespaceSlots)
	return forbidden(
		"!variables.creating || (size(variables.namespaces) > 0 && size(variables.namespaces) <= "+slots+") || "+nr.check(""),
		fmt.Sprintf(`request.userInfo.username + ' may not ' + %s + ' at the cluster scope (in every namespace), and ' + %s + ': a MoveOperation with spec.namespaces empty (every namespace) or naming more than %s namespaces needs that right in every namespace; name your namespaces in spec.namespaces'`,
			nr.cel(right.verbResource), nr.cel(right.reason), slots))
}

func namespaceSlot(nr namespaceRight, i int) admissionregistrationv1.Validation {
	ns := fmt.Sprintf("variables.namespaces[%d]", i)
	return forbidden(
		fmt.Sprintf("!variables.creating || size(variables.namespaces) <= %d || size(variables.namespaces) > %d || %s", i, NamespaceSlots, nr.check(ns)),
		fmt.Sprintf(`request.userInfo.username + ' may not ' + %s + ' in namespace ' + %s + ', which spec.namespaces names, and ' + %s`, nr.cel(right.verbResource), ns, nr.cel(right.reason)))
}

// check is the CEL that asks the authorizer whether the requesting user
// may exercise the right the MoveOperation needs (a restore's or a
// move's) in namespace, a CEL expression ("" for every namespace).
func (nr namespaceRight) check(namespace string) string {
	c := fmt.Sprintf("authorizer.group('%s').resource('%s')", nr.move.group, nr.move.resource)
	if namespace != "" {
		c += ".namespace(" + namespace + ")"
	}
	return c + fmt.Sprintf(".check(variables.restoring ? '%s' : '%s').allowed()", nr.restore.verb, nr.move.verb)
}

// cel is a CEL string expression: text of the restore's right for a
// restore, of the move's otherwise.
func (nr namespaceRight) cel(text func(right) string) string {
	return fmt.Sprintf(`(variables.restoring ? '%s' : '%s')`, escape(text(nr.restore)), escape(text(nr.move)))
}

// verbResource is "verb resource.group", as a refusal names the right.
func (r right) verbResource() string { return r.verb + " " + groupResource(r.group, r.resource) }

// reason is why the MoveOperation needs the right.
func (r right) reason() string { return r.why }

func targetSecretValidation() []admissionregistrationv1.Validation {
	r := targetSecret
	// Each Secret the spec may name, by the field that names it: the
	// target's kubeconfig, a backup's public keys, a restore's private
	// keys, and registry credentials (a backup names no kubeconfig, a
	// restore no target).
	var out []admissionregistrationv1.Validation
	for _, f := range []struct{ present, field, path string }{
		{"has(object.spec.target) && has(object.spec.target.kubeconfigSecretRef)", "object.spec.target.kubeconfigSecretRef.name", "spec.target.kubeconfigSecretRef"},
		{"has(object.spec.target) && has(object.spec.target.archive) && has(object.spec.target.archive.recipientsSecretRef)", "object.spec.target.archive.recipientsSecretRef.name", "spec.target.archive.recipientsSecretRef"},
		{"has(object.spec.target) && has(object.spec.target.archive) && has(object.spec.target.archive.oci) && has(object.spec.target.archive.oci.credentialsSecretRef)", "object.spec.target.archive.oci.credentialsSecretRef.name", "spec.target.archive.oci.credentialsSecretRef"},
		{"has(object.spec.source) && has(object.spec.source.archive.identitySecretRef)", "object.spec.source.archive.identitySecretRef.name", "spec.source.archive.identitySecretRef"},
		{"has(object.spec.source) && has(object.spec.source.archive.oci) && has(object.spec.source.archive.oci.credentialsSecretRef)", "object.spec.source.archive.oci.credentialsSecretRef.name", "spec.source.archive.oci.credentialsSecretRef"},
		{"has(object.spec.template) && has(object.spec.template.target) && has(object.spec.template.target.archive) && has(object.spec.template.target.archive.recipientsSecretRef)", "object.spec.template.target.archive.recipientsSecretRef.name", "spec.template.target.archive.recipientsSecretRef"},
		{"has(object.spec.template) && has(object.spec.template.target) && has(object.spec.template.target.archive) && has(object.spec.template.target.archive.oci) && has(object.spec.template.target.archive.oci.credentialsSecretRef)", "object.spec.template.target.archive.oci.credentialsSecretRef.name", "spec.template.target.archive.oci.credentialsSecretRef"},
	} {
		out = append(out, forbidden("!variables.creating || !("+f.present+") || "+r.check("request.namespace", f.field),
			fmt.Sprintf(`request.userInfo.username + ' may not %s secret ' + %s + ' in namespace ' + request.namespace + ', which %s names, and %s'`, r.verb, f.field, f.path, escape(r.why))))
	}
	return out
}

func controllerValidations() []admissionregistrationv1.Validation {
	r := scaleController
	slots := fmt.Sprint(ControllerSlots)
	out := []admissionregistrationv1.Validation{forbidden(
		"!variables.creating || size(variables.scaled) <= "+slots+" || "+r.check("", ""),
		fmt.Sprintf(`request.userInfo.username + ' may not %s %s at the cluster scope: spec.controllers.additional names more than %s Deployments of the source, which needs that right in every namespace'`, r.verb, groupResource(r.group, r.resource), slots))}
	for i := range ControllerSlots {
		c := fmt.Sprintf("variables.scaled[%d]", i)
		out = append(out, forbidden(
			fmt.Sprintf("!variables.creating || size(variables.scaled) <= %d || size(variables.scaled) > %d || %s", i, ControllerSlots, r.check(c+".namespace", c+".name")),
			fmt.Sprintf(`request.userInfo.username + ' may not %s deployment ' + %[3]s.namespace + '/' + %[3]s.name + ' in the source, and %[2]s'`, r.verb, escape(r.why), c)))
	}
	return out
}

// MutatingPolicy is the MutatingAdmissionPolicy of config/admission (for
// Kubernetes 1.36 and later), named without the installer's prefix, and
// its binding. On create it writes who the API server authenticated into
// the created-by annotations, over anything the request said; on update it
// writes back what they were, so that re-applying a manifest without them
// (kubectl apply, a GitOps tool's server-side apply) keeps them instead of
// being refused.
func MutatingPolicy() (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	by, groups := movev1alpha1.CreatedByAnnotation, movev1alpha1.CreatedByGroupsAnnotation
	old := func(k string) string {
		return fmt.Sprintf(`has(oldObject.metadata.annotations) && '%[1]s' in oldObject.metadata.annotations ? oldObject.metadata.annotations['%[1]s'] : ''`, k)
	}
	expr := fmt.Sprintf(`Object{metadata: Object.metadata{annotations: request.operation == 'CREATE' ? {'%s': request.userInfo.username, '%s': has(request.userInfo.groups) ? request.userInfo.groups.join('%s') : ''} : {'%[1]s': %[4]s, '%[2]s': %[5]s}}}`,
		by, groups, groupSeparator, old(by), old(groups))
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: MutatingPolicyBaseName},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConstraints:   matchCreatorResources(admissionregistrationv1.Create, admissionregistrationv1.Update),
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr},
			}},
		},
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: MutatingPolicyBaseName},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: MutatingPolicyBaseName},
	}
	return p, b
}
