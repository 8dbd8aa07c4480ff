package access

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Denial is an authorizer's refusal of one request, read from a 403.
type Denial struct {
	// User is the identity refused, as the API server names it.
	User      string
	Verb      string
	Group     string
	Resource  string
	Namespace string
}

// rbacDenial is the message the API server writes when its authorizer
// refuses a resource request (apiserver's responsewriters.forbiddenMessage),
// after "<resource> [\"<name>\"] is forbidden: ". The authorizer may append
// ": <reason>".
var rbacDenial = regexp.MustCompile(`is forbidden: User "([^"]*)" cannot ([a-z]+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]*)"| at the cluster scope)`)

// Denied reports whether err is, or wraps, an authorizer's refusal, and
// what it refused. Other 403s are not: an admission webhook's or policy's
// denial, a namespace being terminated, a refused non-resource path.
func Denied(err error) (Denial, bool) {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return Denial{}, false
	}
	s := status.Status()
	if s.Code != http.StatusForbidden || s.Reason != metav1.StatusReasonForbidden {
		return Denial{}, false
	}
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Type == "NamespaceTerminating" {
				return Denial{}, false
			}
		}
	}
	m := rbacDenial.FindStringSubmatch(s.Message)
	if m == nil {
		return Denial{}, false
	}
	d := Denial{User: m[1], Verb: m[2], Resource: m[3], Group: m[4], Namespace: m[5]}
	// A webhook may quote an authorizer's message in its own; the
	// authorizer's stands at the start.
	before, _, _ := strings.Cut(s.Message, m[0])
	if strings.Contains(before, "denied the request") {
		return Denial{}, false
	}
	return d, true
}

// Need is the need the denial refused, in a cluster.
func (d Denial) Need(cluster movev1alpha1.ClusterRole) Need {
	return Need{Cluster: cluster, Verb: d.Verb, Group: d.Group, Resource: d.Resource, Namespace: d.Namespace}
}

// DeniedMessage says what was refused, to whom, and the rule that grants
// it. cluster is "" when the caller does not know which cluster refused.
func DeniedMessage(cluster movev1alpha1.ClusterRole, d Denial, err error) string {
	where := "in the source or the target cluster (the user names the operator's identity there)"
	if cluster != "" {
		where = "in the " + strings.ToLower(string(cluster)) + " cluster"
	}
	scope := "at the cluster scope"
	if d.Namespace != "" {
		scope = fmt.Sprintf("in namespace %s", d.Namespace)
	}
	r := Rule{Cluster: cluster, Group: d.Group, Resource: d.Resource, Verbs: []string{d.Verb}}
	return fmt.Sprintf(
		"access denied %s: %q may not %s %s %s (RBAC changed, or the role lacks it); the move does not wait for it. Grant it with a ClusterRole labelled %s: \"true\" there (see docs/access.md), with the rule:\n%s\n(%v)",
		where, d.User, d.Verb, r.GroupResource(), scope, AggregationLabel, r.YAML(), err)
}
