package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

const manifest = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n"

func TestRunRefusesBeforeReachingAnyCluster(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.kubeconfig")
	target := filepath.Join(dir, "target.kubeconfig")
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: {server: 'https://10.1.2.3:6443'}}]\n" +
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: t, context: {cluster: t, user: u}}]\ncurrent-context: t\n"
	if err := os.WriteFile(target, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		manifest string
		wantIs   error
		wantText string
	}{{
		name:   "help is not an error",
		args:   []string{"--help"},
		wantIs: flag.ErrHelp,
	}, {
		name:   "an unknown flag is a usage error",
		args:   []string{"--bogus"},
		wantIs: ErrUsage,
	}, {
		name:     "an argument that is not a flag is a usage error naming it",
		args:     []string{"target"},
		wantIs:   ErrUsage,
		wantText: `"target"`,
	}, {
		name:     "a token shorter than ten minutes is refused naming the minimum",
		args:     []string{"--duration", "5m", "--print"},
		wantText: "at least 10m",
	}, {
		name:     "an empty Secret name is refused",
		args:     []string{"--secret-name", "", "--print"},
		wantText: "--secret-name",
	}, {
		name:     "a binary without the manifest asks for --manifest",
		args:     []string{"--print"},
		manifest: "-",
		wantText: "--manifest",
	}, {
		name:     "a target kubeconfig that cannot be loaded names the flag to fix",
		args:     []string{"--print", "--target-kubeconfig", missing},
		wantText: "--target-kubeconfig",
	}, {
		name:     "a source kubeconfig that cannot be loaded names the flags to fix, and --print",
		args:     []string{"--target-kubeconfig", target, "--source-kubeconfig", missing},
		wantText: "--source-kubeconfig (and --source-context) at the cluster the operator runs in, or give --print",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := []byte(manifest)
			if tc.manifest == "-" {
				m = nil
			}
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), tc.args, m, &stdout, &stderr)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("err = %v, want %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %q, want it to contain %q", err, tc.wantText)
			}
			if stdout.Len() > 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
		})
	}
}

// A command line the command cannot parse exits 2 (ErrUsage), and what the
// user sees is on stderr alone: what was wrong, then the usage. An
// argument that is not a flag used to exit 2 without a word.
func TestAUsageErrorSaysWhatWasWrongThenTheUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{{
		name: "an argument that is not a flag is named",
		args: []string{"extra-arg"},
		want: `unexpected arguments ["extra-arg"]: every setting is a flag`,
	}, {
		name: "an argument after the flags is named",
		args: []string{"--print", "extra-arg"},
		want: `unexpected arguments ["extra-arg"]`,
	}, {
		name: "an unknown flag is named",
		args: []string{"--bogus"},
		want: "flag provided but not defined: -bogus",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), tc.args, []byte(manifest), &stdout, &stderr)
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("err = %v, want %v (exit code 2)", err, ErrUsage)
			}
			got := stderr.String()
			what, usageAt := strings.Index(got, tc.want), strings.Index(got, "Usage: manager target-access [flags]")
			if what < 0 || usageAt < what {
				t.Errorf("stderr must say %q, then the usage; it holds:\n%s", tc.want, got)
			}
			if !strings.Contains(got, "--target-kubeconfig") {
				t.Errorf("the usage on stderr lacks the flags:\n%s", got)
			}
			if stdout.Len() > 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target *rest.Config
		server string
		want   []string
	}{{
		name:   "a routable target says nothing",
		target: &rest.Config{Host: "https://10.1.2.3:6443"},
	}, {
		name:   "a loopback target asks for --server",
		target: &rest.Config{Host: "https://127.0.0.1:40000"},
		want:   []string{"--server"},
	}, {
		name:   "localhost is loopback too",
		target: &rest.Config{Host: "https://localhost:6443"},
		want:   []string{"--server"},
	}, {
		name:   "a server given is said, and a loopback one is not warned about once replaced",
		target: &rest.Config{Host: "https://127.0.0.1:40000"},
		server: "https://target.internal:6443",
		want:   []string{"(--server)"},
	}, {
		name:   "an unverified target is warned about",
		target: &rest.Config{Host: "https://10.1.2.3:6443", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		want:   []string{"insecure-skip-tls-verify"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&options{server: tc.server}).warnings(tc.target)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestThePrintedSecretIsWhatKubectlApplies(t *testing.T) {
	out, err := secretYAML("ops", "target-kubeconfig", "", []byte("apiVersion: v1\nkind: Config\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := yaml.UnmarshalStrict(out, s); err != nil {
		t.Fatalf("the printed Secret does not read back: %v\n%s", err, out)
	}
	if s.Kind != "Secret" || s.APIVersion != "v1" || s.Namespace != "ops" || s.Name != "target-kubeconfig" || string(s.Data["value"]) != "apiVersion: v1\nkind: Config\n" {
		t.Errorf("printed Secret:\n%s", out)
	}
	if strings.Contains(string(out), "creationTimestamp") {
		t.Errorf("the printed Secret holds a creationTimestamp:\n%s", out)
	}
}
