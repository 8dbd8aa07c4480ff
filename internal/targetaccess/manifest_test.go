package targetaccess

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
)

// readDist reads a file of the installer, as generated (make dist).
func readDist(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "dist", name))
	if err != nil {
		t.Fatalf("reading dist/%s (make dist writes it): %v", name, err)
	}
	return b
}

// roleRules returns the rules of the manifest's ClusterRole name.
func roleRules(t *testing.T, m *Manifest, name string) []rbacv1.PolicyRule {
	t.Helper()
	r, ok := m.clusterRole(name)
	if !ok {
		t.Fatalf("the manifest has no ClusterRole %s", name)
	}
	return r.Rules
}

func TestTheShippedTargetManifest(t *testing.T) {
	m, err := ParseManifest(readDist(t, "target-access.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sa := types.NamespacedName{Namespace: "move-operator-system", Name: "move-operator-target"}

	t.Run("names the ServiceAccount the options default to", func(t *testing.T) {
		if m.ServiceAccount != sa {
			t.Errorf("ServiceAccount = %s, want %s", m.ServiceAccount, sa)
		}
	})
	t.Run("applies the Namespace before what lives in it", func(t *testing.T) {
		if k := m.Objects[0].GetKind(); k != "Namespace" {
			t.Errorf("first object is a %s", k)
		}
	})
	t.Run("binds the ServiceAccount to the aggregated role, which gathers the base role's rules", func(t *testing.T) {
		got, err := m.AggregatedRolesOf(sa)
		if err != nil {
			t.Fatal(err)
		}
		want := []Aggregated{{Name: "move-operator-target", Rules: roleRules(t, m, "move-operator-target-base")}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("aggregated roles (-want +got):\n%s", diff)
		}
	})
	t.Run("holds the decided object names", func(t *testing.T) {
		var got []string
		for _, o := range m.Objects {
			got = append(got, o.GetKind()+" "+types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}.String())
		}
		want := []string{
			"Namespace /move-operator-system",
			"ServiceAccount move-operator-system/move-operator-target",
			"ClusterRole /move-operator-target",
			"ClusterRole /move-operator-target-base",
			"ClusterRoleBinding /move-operator-target",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
	})
}

// A cluster that is both a source and a target holds both installers: each
// aggregated role must gather its own base role, the shared label's roles,
// and never the other side's base.
func TestTheSourceAndTargetRolesStayApartInOneCluster(t *testing.T) {
	both := append(append(readDist(t, "install.yaml"), []byte("\n---\n")...), readDist(t, "target-access.yaml")...)
	m, err := ParseManifest(both)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.AggregatedRoles()
	if err != nil {
		t.Fatal(err)
	}
	want := []Aggregated{
		{Name: "move-operator-aggregated-manager-role", Rules: roleRules(t, m, "move-operator-manager-role")},
		{Name: "move-operator-target", Rules: roleRules(t, m, "move-operator-target-base")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aggregated roles (-want +got):\n%s", diff)
	}
}

func TestParseManifest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		wantSA   types.NamespacedName
		wantErr  bool
	}{{
		name:     "a manifest with two ServiceAccounts names no default",
		manifest: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b, namespace: x}\n",
	}, {
		name:     "empty documents are skipped",
		manifest: "---\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n---\n",
		wantSA:   types.NamespacedName{Namespace: "x", Name: "a"},
	}, {
		name:     "an object without a name is refused",
		manifest: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {namespace: x}\n",
		wantErr:  true,
	}, {
		name:     "a manifest without objects is refused",
		manifest: "# nothing\n",
		wantErr:  true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tc.manifest))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if err == nil && m.ServiceAccount != tc.wantSA {
				t.Errorf("ServiceAccount = %s, want %s", m.ServiceAccount, tc.wantSA)
			}
		})
	}
}
