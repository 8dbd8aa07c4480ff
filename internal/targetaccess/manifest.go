// Package targetaccess gives the operator its access to a target cluster
// in one step: it applies the target's side of the installer
// (dist/target-access.yaml: a ServiceAccount, the ClusterRoles of what a
// move does there, the binding), mints a token for that ServiceAccount with
// the TokenRequest API, and builds from it a self-contained kubeconfig for
// the MoveOperation's Secret in the source cluster (WriteSecret).
//
// It never writes the token anywhere but its result and the Secret it is
// asked to write, never logs it, and never grants more than the manifest
// it is given holds.
package targetaccess

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var (
	namespaceGK          = schema.GroupKind{Kind: "Namespace"}
	serviceAccountGK     = schema.GroupKind{Kind: "ServiceAccount"}
	clusterRoleGK        = schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"}
	clusterRoleBindingGK = schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRoleBinding"}
)

// Manifest is the target's side of the installer, parsed.
type Manifest struct {
	// Objects in the order they are applied: Namespaces first, then the
	// others in the manifest's order.
	Objects []*unstructured.Unstructured
	// ServiceAccount is the manifest's only ServiceAccount, if it holds
	// exactly one: the default identity to mint a token for.
	ServiceAccount types.NamespacedName
	clusterRoles   []rbacv1.ClusterRole
	bindings       []rbacv1.ClusterRoleBinding
}

// ParseManifest reads a multi-document YAML manifest (such as
// dist/target-access.yaml).
func ParseManifest(data []byte) (*Manifest, error) {
	m := &Manifest{}
	var namespaces, others []*unstructured.Unstructured
	var serviceAccounts []types.NamespacedName
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("reading object %d of the manifest: %w", i, err)
		}
		if len(u.Object) == 0 {
			continue // an empty document, between two "---"
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("object %d of the manifest has no apiVersion, kind or name", i)
		}
		switch u.GroupVersionKind().GroupKind() {
		case namespaceGK:
			namespaces = append(namespaces, u)
			continue
		case serviceAccountGK:
			serviceAccounts = append(serviceAccounts, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()})
		case clusterRoleGK:
			r := rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				return nil, fmt.Errorf("reading ClusterRole %s of the manifest: %w", u.GetName(), err)
			}
			m.clusterRoles = append(m.clusterRoles, r)
		case clusterRoleBindingGK:
			b := rbacv1.ClusterRoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				return nil, fmt.Errorf("reading ClusterRoleBinding %s of the manifest: %w", u.GetName(), err)
			}
			m.bindings = append(m.bindings, b)
		}
		others = append(others, u)
	}
	if len(namespaces)+len(others) == 0 {
		return nil, errors.New("the manifest holds no objects")
	}
	m.Objects = append(namespaces, others...) //nolint:gocritic // namespaces is not used again: the manifest takes it over
	if len(serviceAccounts) == 1 {
		m.ServiceAccount = serviceAccounts[0]
	}
	return m, nil
}

// Aggregated is an aggregated ClusterRole of the manifest and the rules it
// must hold once the clusterrole-aggregation controller has filled it: those
// of the manifest's ClusterRoles that its selectors pick.
type Aggregated struct {
	Name  string
	Rules []rbacv1.PolicyRule
}

// AggregatedRoles returns every aggregated ClusterRole of the manifest.
func (m *Manifest) AggregatedRoles() ([]Aggregated, error) {
	var out []Aggregated
	for _, role := range m.clusterRoles {
		if role.AggregationRule == nil {
			continue
		}
		a, err := m.aggregated(role)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// AggregatedRolesOf returns the aggregated ClusterRoles that the manifest's
// ClusterRoleBindings grant to the ServiceAccount sa.
func (m *Manifest) AggregatedRolesOf(sa types.NamespacedName) ([]Aggregated, error) {
	var out []Aggregated
	for _, b := range m.bindings {
		if b.RoleRef.Kind != "ClusterRole" || !bindsServiceAccount(b, sa) {
			continue
		}
		role, ok := m.clusterRole(b.RoleRef.Name)
		if !ok || role.AggregationRule == nil {
			continue
		}
		a, err := m.aggregated(role)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// aggregated returns the rules the manifest's ClusterRoles give an
// aggregated role through its selectors.
func (m *Manifest) aggregated(role rbacv1.ClusterRole) (Aggregated, error) {
	a := Aggregated{Name: role.Name}
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return Aggregated{}, fmt.Errorf("ClusterRole %s of the manifest: aggregation selector: %w", role.Name, err)
		}
		for _, r := range m.clusterRoles {
			if r.Name != role.Name && selector.Matches(labels.Set(r.Labels)) {
				a.Rules = append(a.Rules, r.Rules...)
			}
		}
	}
	return a, nil
}

func (m *Manifest) clusterRole(name string) (rbacv1.ClusterRole, bool) {
	for _, r := range m.clusterRoles {
		if r.Name == name {
			return r, true
		}
	}
	return rbacv1.ClusterRole{}, false
}

func bindsServiceAccount(b rbacv1.ClusterRoleBinding, sa types.NamespacedName) bool {
	for _, s := range b.Subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.Name && s.Namespace == sa.Namespace {
			return true
		}
	}
	return false
}
