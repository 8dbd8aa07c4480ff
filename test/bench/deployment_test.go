package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/testenv"
)

// lastGoMemLimit is the GOMEMLIMIT a command would run with: the last entry
// of its environment wins.
func lastGoMemLimit(env []string) (string, bool) {
	value, found := "", false
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, goMemLimitEnvName+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}

// The bench runs the operator with the soft memory limit its Deployment
// gives it unless -operator-gomemlimit says otherwise, and the limit is read
// from dist/install.yaml, not restated here.
func TestTheOperatorsGoMemLimitIsTheDeploymentsUnlessTheBenchOverridesIt(t *testing.T) {
	root, err := testenv.RepositoryRoot("go test ./test/bench/")
	if err != nil {
		t.Fatal(err)
	}
	in, err := installed.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	deployed, ok := lastGoMemLimit(mustEnv(t, in))
	if !ok {
		t.Fatalf("%s gives the manager no %s: the bench's default measures nothing the Deployment sets", installed.InstallPath, goMemLimitEnvName)
	}
	for _, tc := range []struct {
		name, flag, want string
	}{
		{"by default the Deployment's limit applies", "deployment", deployed},
		{"off runs without a limit", "off", "off"},
		{"an empty flag runs without a limit", "", "off"},
		{"a value replaces the Deployment's", "200MiB", "200MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, err := options{goMemLimit: tc.flag}.operatorGoMemLimit(in)
			if err != nil {
				t.Fatal(err)
			}
			cmd, err := in.Command(installed.Process{
				Binary:   "manager",
				Identity: &installed.Identity{Kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")},
				Env:      limit.env,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := lastGoMemLimit(cmd.Environ()); got != tc.want {
				t.Errorf("-operator-gomemlimit %q runs the manager with %s=%q, want %q", tc.flag, goMemLimitEnvName, got, tc.want)
			}
			if !strings.HasPrefix(limit.describe, tc.want) {
				t.Errorf("the report says %q, want it to start with %q", limit.describe, tc.want)
			}
		})
	}
}

func mustEnv(t *testing.T, in *installed.Install) []string {
	t.Helper()
	env, err := in.Env()
	if err != nil {
		t.Fatal(err)
	}
	return env
}
