package access

import (
	"fmt"
	"strings"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// AggregationLabel, on a ClusterRole in either cluster, has its rules
// aggregated into the operator's role there (docs/access.md): how a
// provider's kinds in another API group are granted.
const AggregationLabel = "move.cluster.x-k8s.io/aggregate-to-manager"

// Rule is a ClusterRole rule that grants missing needs: one resource of one
// group, all its missing verbs.
type Rule struct {
	Cluster  movev1alpha1.ClusterRole
	Group    string
	Resource string
	Verbs    []string
	// Namespaces are where the needs are, when not cluster-wide: a
	// ClusterRole bound cluster-wide grants them, a Role there would too.
	Namespaces []string
}

// Rules groups missing needs into rules, per cluster and per group and
// resource, in the order of Compact.
func Rules(missing []Need) []Rule {
	var out []Rule
	for _, n := range Compact(missing) {
		last := len(out) - 1
		if last < 0 || out[last].Cluster != n.Cluster || out[last].Group != n.Group || out[last].Resource != n.Resource {
			out = append(out, Rule{Cluster: n.Cluster, Group: n.Group, Resource: n.Resource})
			last++
		}
		r := &out[last]
		if !contains(r.Verbs, n.Verb) {
			r.Verbs = append(r.Verbs, n.Verb)
		}
		if n.Namespace != "" && !contains(r.Namespaces, n.Namespace) {
			r.Namespaces = append(r.Namespaces, n.Namespace)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// GroupResource names the rule's resource as kubectl does:
// "baremetalhosts.metal3.io", "namespaces".
func (r Rule) GroupResource() string { return groupResource(r.Group, r.Resource) }

func groupResource(group, resource string) string {
	if group == "" {
		return resource
	}
	// A subresource goes after the group: "clusters.cluster.x-k8s.io/status".
	res, sub, found := strings.Cut(resource, "/")
	if found {
		return res + "." + group + "/" + sub
	}
	return resource + "." + group
}

// YAML is the rule as it is written in a ClusterRole's rules, ready to
// paste.
func (r Rule) YAML() string {
	return fmt.Sprintf("- apiGroups: [%q]\n  resources: [%q]\n  verbs: [%s]", r.Group, r.Resource, quoteJoin(r.Verbs))
}

func quoteJoin(list []string) string {
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ",")
}

// Message says, for every missing need, which cluster lacks it, the verbs
// and the resource, and the rules that grant them, grouped per cluster, as
// text a user can paste into a ClusterRole labelled AggregationLabel in
// that cluster. It is "" when nothing is missing.
func Message(missing []Need) string {
	rules := Rules(missing)
	if len(rules) == 0 {
		return ""
	}
	var denied []string
	for _, r := range rules {
		where := ""
		if len(r.Namespaces) > 0 {
			where = " in namespace " + strings.Join(r.Namespaces, ", ")
		}
		denied = append(denied, fmt.Sprintf("%s cluster: %s %s%s", strings.ToLower(string(r.Cluster)), strings.Join(r.Verbs, ", "), r.GroupResource(), where))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the operator's identity may not do what the move does: %s. ", strings.Join(denied, "; "))
	fmt.Fprintf(&b, "Grant it in each cluster named with a ClusterRole labelled %s: \"true\" (aggregated into the operator's role there, see docs/access.md), then create a new MoveOperation. Its rules:", AggregationLabel)
	var cluster movev1alpha1.ClusterRole
	for _, r := range rules {
		if r.Cluster != cluster {
			cluster = r.Cluster
			fmt.Fprintf(&b, "\n# %s cluster\n", strings.ToLower(string(cluster)))
		} else {
			b.WriteString("\n")
		}
		b.WriteString(r.YAML())
	}
	return b.String()
}
