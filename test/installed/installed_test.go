package installed

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/move-operator/move-operator/test/testenv"
)

func readInstall(t *testing.T) *Install {
	t.Helper()
	root, err := testenv.RepositoryRoot("go test ./test/installed/")
	if err != nil {
		t.Fatal(err)
	}
	in, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestTheManagerRunsWithTheDeploymentsArgsAndOnlyItsAddressesReplaced(t *testing.T) {
	in := readInstall(t)
	c, err := in.Manager()
	if err != nil {
		t.Fatal(err)
	}
	id := &Identity{Kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")}
	args, err := in.Args(Process{Binary: "manager", Identity: id, ProbeAddress: "127.0.0.1:1234", Args: []string{"--extra=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Args) == 0 {
		t.Fatal("the Deployment's manager has no args: nothing to check")
	}
	for i, a := range c.Args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--metrics-bind-address":
			if args[i] != name+"=0" {
				t.Errorf("arg %d is %q, want the metrics server off", i, args[i])
			}
		case "--health-probe-bind-address":
			if args[i] != name+"=127.0.0.1:1234" {
				t.Errorf("arg %d is %q, want the probes on the given address", i, args[i])
			}
		default:
			if args[i] != a {
				t.Errorf("arg %d is %q, want the Deployment's %q", i, args[i], a)
			}
		}
	}
	rest := args[len(c.Args):]
	want := []string{"--leader-election-namespace=" + in.Deployment.Namespace, "--extra=1"}
	if !slices.Equal(rest, want) {
		t.Errorf("after the Deployment's args come %q, want %q", rest, want)
	}
}

func TestTheManagersEnvIsResolvedAsTheKubeletResolvesIt(t *testing.T) {
	in := readInstall(t)
	env, err := in.Env()
	if err != nil {
		t.Fatal(err)
	}
	c, _ := in.Manager()
	limit := c.Resources.Limits["memory"]
	if limit.IsZero() {
		t.Fatal("the manager container sets no memory limit")
	}
	found := false
	for _, e := range env {
		if strings.HasPrefix(e, "GOMEMLIMIT=") {
			found = true
			if e != "GOMEMLIMIT="+strconv.FormatInt(limit.Value(), 10) {
				t.Errorf("GOMEMLIMIT is %q, want the limit %s in bytes", e, limit.String())
			}
		}
	}
	if !found {
		t.Errorf("no GOMEMLIMIT in %q", env)
	}
	// A value the Deployment states is passed as it is, and EnvValue finds
	// it where Env has it.
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue
		}
		if !slices.Contains(env, e.Name+"="+e.Value) {
			t.Errorf("%s=%s is not in %q", e.Name, e.Value, env)
		}
		if got, err := in.EnvValue(e.Name); err != nil || got != e.Value {
			t.Errorf("EnvValue(%s) = %q, %v; want %q", e.Name, got, err, e.Value)
		}
	}
	if got, err := in.EnvValue("NOT_SET_BY_THE_DEPLOYMENT"); err != nil || got != "" {
		t.Errorf("EnvValue of a variable the Deployment does not set = %q, %v; want \"\"", got, err)
	}
}

func TestTheIdentityIsTheDeploymentsServiceAccountAndItsRBAC(t *testing.T) {
	in := readInstall(t)
	ns, sa := in.ServiceAccount()
	if ns == "" || sa == "" {
		t.Fatalf("the Deployment names no ServiceAccount (%q/%q)", ns, sa)
	}
	kinds := map[string]int{}
	foundSA := false
	for _, o := range in.IdentityObjects() {
		kinds[o.GetKind()]++
		if o.GetKind() == "ServiceAccount" && o.GetNamespace() == ns && o.GetName() == sa {
			foundSA = true
		}
		if o.GetKind() == "Deployment" || o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("%s %s is not part of the identity", o.GetKind(), o.GetName())
		}
	}
	if !foundSA {
		t.Errorf("the installer holds no ServiceAccount %s/%s", ns, sa)
	}
	for _, k := range []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if kinds[k] == 0 {
			t.Errorf("the identity has no %s (has %v)", k, kinds)
		}
	}
}
