package access_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
)

// capiKinds are kinds of Cluster API's groups, a few per group: the shipped
// roles grant those groups' kinds by wildcard, so a few stand for all.
var capiKinds = []access.Kind{
	{Resource: "secrets", Namespaced: true},
	{Resource: "configmaps", Namespaced: true},
	{Group: "cluster.x-k8s.io", Resource: "clusters", Namespaced: true},
	{Group: "cluster.x-k8s.io", Resource: "clusterclasses", Namespaced: true},
	{Group: "cluster.x-k8s.io", Resource: "machines", Namespaced: true},
	{Group: "cluster.x-k8s.io", Resource: "machinedeployments", Namespaced: true},
	{Group: "bootstrap.cluster.x-k8s.io", Resource: "kubeadmconfigs", Namespaced: true},
	{Group: "controlplane.cluster.x-k8s.io", Resource: "kubeadmcontrolplanes", Namespaced: true},
	{Group: "infrastructure.cluster.x-k8s.io", Resource: "loopclusters", Namespaced: true},
	{Group: "addons.cluster.x-k8s.io", Resource: "clusterresourcesets", Namespaced: true},
	{Group: "ipam.cluster.x-k8s.io", Resource: "ipaddresses", Namespaced: true},
	{Group: "runtime.cluster.x-k8s.io", Resource: "extensionconfigs"},
}

// shippedNeeds is everything the operator does in a cluster with the
// Cluster API kinds, under every spec.gitOps.
func shippedNeeds(cluster movev1alpha1.ClusterRole, namespace string) []access.Need {
	m := access.Move{SourceKinds: capiKinds, TargetKinds: capiKinds, Namespace: "ops", ClaimNamespace: namespace, GitOps: movev1alpha1.GitOpsSuspend}
	all := append(access.Needs(m), access.Reviews()...)
	if cluster == movev1alpha1.ClusterSource {
		all = append(all, access.Operator()...)
	}
	var out []access.Need
	for _, n := range all {
		if n.Cluster == cluster {
			out = append(out, n)
		}
	}
	return out
}

// manifests reads the RBAC objects of a multi-document YAML file.
type manifests struct {
	clusterRoles        map[string]rbacv1.ClusterRole
	roles               []rbacv1.Role
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roleBindings        []rbacv1.RoleBinding
}

func readManifests(t *testing.T, path string) manifests {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is not there yet", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	m := manifests{clusterRoles: map[string]rbacv1.ClusterRole{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		var into any
		switch tm.Kind {
		case "ClusterRole":
			into = &rbacv1.ClusterRole{}
		case "Role":
			into = &rbacv1.Role{}
		case "ClusterRoleBinding":
			into = &rbacv1.ClusterRoleBinding{}
		case "RoleBinding":
			into = &rbacv1.RoleBinding{}
		default:
			continue
		}
		if err := yaml.Unmarshal(doc, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch o := into.(type) {
		case *rbacv1.ClusterRole:
			m.clusterRoles[o.Name] = *o
		case *rbacv1.Role:
			m.roles = append(m.roles, *o)
		case *rbacv1.ClusterRoleBinding:
			m.clusterRoleBindings = append(m.clusterRoleBindings, *o)
		case *rbacv1.RoleBinding:
			m.roleBindings = append(m.roleBindings, *o)
		}
	}
	return m
}

// rulesOf returns a ClusterRole's rules, with those of the ClusterRoles of
// the same file its aggregation rule selects (what the API server's
// aggregation controller would give it).
func (m manifests) rulesOf(t *testing.T, name string) []rbacv1.PolicyRule {
	cr, ok := m.clusterRoles[name]
	if !ok {
		t.Fatalf("ClusterRole %s is bound but not in the file", name)
	}
	if cr.AggregationRule == nil {
		return cr.Rules
	}
	var out []rbacv1.PolicyRule
	for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range m.clusterRoles {
			if other.Name != name && s.Matches(labels.Set(other.Labels)) {
				out = append(out, other.Rules...)
			}
		}
	}
	return out
}

// grants are the rules bound to a ServiceAccount: cluster-wide ones, and
// per namespace.
type grants struct {
	wide       []rbacv1.PolicyRule
	namespaced map[string][]rbacv1.PolicyRule
}

func (m manifests) grantsTo(t *testing.T, serviceAccount func(rbacv1.Subject) bool) grants {
	g := grants{namespaced: map[string][]rbacv1.PolicyRule{}}
	for _, b := range m.clusterRoleBindings {
		if slices.ContainsFunc(b.Subjects, serviceAccount) {
			g.wide = append(g.wide, m.rulesOf(t, b.RoleRef.Name)...)
		}
	}
	for _, b := range m.roleBindings {
		if !slices.ContainsFunc(b.Subjects, serviceAccount) {
			continue
		}
		for _, r := range m.roles {
			if b.RoleRef.Kind == "Role" && r.Name == b.RoleRef.Name && r.Namespace == b.Namespace {
				g.namespaced[b.Namespace] = append(g.namespaced[b.Namespace], r.Rules...)
			}
		}
	}
	return g
}

func has(list []string, s string) bool { return slices.Contains(list, s) || slices.Contains(list, "*") }

// allows is RBAC's rule matching, without resource names (the move names
// none) and non-resource URLs.
func allows(r rbacv1.PolicyRule, n access.Need) bool {
	if len(r.ResourceNames) > 0 || !has(r.APIGroups, n.Group) || !has(r.Verbs, n.Verb) {
		return false
	}
	res, _, sub := strings.Cut(n.Resource, "/")
	return has(r.Resources, n.Resource) || (sub && slices.Contains(r.Resources, res+"/*"))
}

// used reports whether some need uses a verb on a resource of a group the
// rule names (a wildcard resource is used by any resource of its group).
func used(needs []access.Need, group, resource, verb string) bool {
	return slices.ContainsFunc(needs, func(n access.Need) bool {
		return (n.Group == group || group == "*") && (n.Resource == resource || resource == "*") && (n.Verb == verb || verb == "*")
	})
}

func TestTheShippedRolesGrantWhatAMoveNeedsAndNothingElse(t *testing.T) {
	root := filepath.Join("..", "..", "dist")
	for _, tc := range []struct {
		name    string
		file    string
		cluster movev1alpha1.ClusterRole
	}{
		{name: "the operator's role in the source, dist/install.yaml", file: "install.yaml", cluster: movev1alpha1.ClusterSource},
		{name: "the operator's role in the target, dist/target-access.yaml", file: "target-access.yaml", cluster: movev1alpha1.ClusterTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := readManifests(t, filepath.Join(root, tc.file))
			// The operator's ServiceAccount is the one the ClusterRoleBindings name.
			var sa *rbacv1.Subject
			for _, b := range m.clusterRoleBindings {
				for i, s := range b.Subjects {
					if s.Kind == "ServiceAccount" && sa == nil {
						sa = &b.Subjects[i]
					}
				}
			}
			if sa == nil {
				t.Fatalf("no ClusterRoleBinding names a ServiceAccount in %s", tc.file)
			}
			is := func(s rbacv1.Subject) bool {
				return s.Kind == "ServiceAccount" && s.Name == sa.Name && s.Namespace == sa.Namespace
			}
			g := m.grantsTo(t, is)
			needs := shippedNeeds(tc.cluster, sa.Namespace)

			var missing []access.Need
			for _, n := range needs {
				rules := g.wide
				if n.Namespace != "" {
					rules = append(slices.Clip(rules), g.namespaced[n.Namespace]...)
				}
				if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return allows(r, n) }) {
					missing = append(missing, n)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%s grants %s too little; it lacks:\n%s", tc.file, sa.Name, access.Message(missing))
			}

			// Least privilege: every verb on every resource the
			// cluster-wide rules grant is one the operator uses.
			var extra []string
			for _, r := range g.wide {
				for _, group := range r.APIGroups {
					for _, res := range r.Resources {
						for _, verb := range r.Verbs {
							if !used(needs, group, res, verb) {
								extra = append(extra, fmt.Sprintf("%s %s", verb, groupResourceOf(group, res)))
							}
						}
					}
				}
			}
			slices.Sort(extra)
			if extra = slices.Compact(extra); len(extra) > 0 {
				t.Errorf("%s grants %s what no move does: %s", tc.file, sa.Name, strings.Join(extra, ", "))
			}
		})
	}
}

func groupResourceOf(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}
