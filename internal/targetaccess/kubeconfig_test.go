package targetaccess

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"

	"github.com/move-operator/move-operator/internal/remote"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func TestEndpointOf(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, []byte(testCA), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     *rest.Config
		server  string
		want    Endpoint
		wantErr string
	}{{
		name: "the config's host and CA data are the endpoint",
		cfg:  &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte(testCA), ServerName: "kubernetes"}},
		want: Endpoint{Server: "https://10.0.0.1:6443", CAData: []byte(testCA), TLSServerName: "kubernetes"},
	}, {
		name:   "a server given replaces the config's host, the CA stays",
		cfg:    &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte(testCA)}},
		server: "https://target.internal:6443",
		want:   Endpoint{Server: "https://target.internal:6443", CAData: []byte(testCA)},
	}, {
		name: "a CA named by file is read into the endpoint, so the kubeconfig is self-contained",
		cfg:  &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}},
		want: Endpoint{Server: "https://10.0.0.1:6443", CAData: []byte(testCA)},
	}, {
		name: "insecure is dropped when a CA verifies the server",
		cfg:  &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte(testCA), Insecure: true}},
		want: Endpoint{Server: "https://10.0.0.1:6443", CAData: []byte(testCA)},
	}, {
		name: "insecure without a CA is kept, for the operator to warn about",
		cfg:  &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		want: Endpoint{Server: "https://10.0.0.1:6443", Insecure: true},
	}, {
		name:    "a CA file that cannot be read is an error naming it",
		cfg:     &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(t.TempDir(), "missing.crt")}},
		wantErr: "missing.crt",
	}, {
		name:    "a config without a host and no server given is an error",
		cfg:     &rest.Config{},
		wantErr: "no server",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EndpointOf(tc.cfg, tc.server)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKubeconfig(t *testing.T) {
	ca, _, err := cert.GenerateSelfSignedCertKey("kubernetes", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("is accepted by the operator and reaches the endpoint with the token", func(t *testing.T) {
		b, err := Kubeconfig(Endpoint{Server: "https://target.internal:6443", CAData: ca, TLSServerName: "kubernetes"}, "move-operator-target", "s3cr3t")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := remote.ParseKubeconfig(b, "the test")
		if err != nil {
			t.Fatalf("the operator refuses the kubeconfig: %v\n%s", err, b)
		}
		got := struct {
			Host, Token, ServerName string
			CAData                  []byte
		}{cfg.Host, cfg.BearerToken, cfg.ServerName, cfg.CAData}
		want := struct {
			Host, Token, ServerName string
			CAData                  []byte
		}{"https://target.internal:6443", "s3cr3t", "kubernetes", ca}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("REST config from the kubeconfig (-want +got):\n%s", diff)
		}
	})
	for _, tc := range []struct {
		name     string
		endpoint Endpoint
		token    string
	}{
		{name: "without a token it is refused", endpoint: Endpoint{Server: "https://x:6443"}},
		{name: "without a server it is refused", token: "t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Kubeconfig(tc.endpoint, "u", tc.token); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	manifest := &Manifest{ServiceAccount: types.NamespacedName{Namespace: "move-operator-system", Name: "move-operator-target"}}
	for _, tc := range []struct {
		name     string
		opts     Options
		manifest *Manifest
		want     Options
		wantErr  bool
	}{{
		name:     "empty options take the manifest's ServiceAccount, a day's token and a minute's wait",
		manifest: manifest,
		want:     Options{ServiceAccount: "move-operator-target", Namespace: "move-operator-system", Duration: 24 * time.Hour, WaitTimeout: time.Minute},
	}, {
		name:     "options given are kept",
		opts:     Options{ServiceAccount: "other", Namespace: "ops", Duration: time.Hour, Server: "https://x:6443", WaitTimeout: time.Second},
		manifest: manifest,
		want:     Options{ServiceAccount: "other", Namespace: "ops", Duration: time.Hour, Server: "https://x:6443", WaitTimeout: time.Second},
	}, {
		name:     "the manifest's ServiceAccount named explicitly takes its namespace",
		opts:     Options{ServiceAccount: "move-operator-target"},
		manifest: manifest,
		want:     Options{ServiceAccount: "move-operator-target", Namespace: "move-operator-system", Duration: 24 * time.Hour, WaitTimeout: time.Minute},
	}, {
		name:     "another ServiceAccount without its namespace is refused",
		opts:     Options{ServiceAccount: "other"},
		manifest: manifest,
		wantErr:  true,
	}, {
		name:     "a manifest without one ServiceAccount needs it named",
		manifest: &Manifest{},
		wantErr:  true,
	}, {
		name:     "a token shorter than the TokenRequest API issues is refused",
		opts:     Options{Duration: 5 * time.Minute},
		manifest: manifest,
		wantErr:  true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.opts.withDefaults(tc.manifest)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	for _, tc := range []struct {
		name, key, wantKey string
	}{
		{name: "without a key the kubeconfig is under the Cluster API convention's", wantKey: "value"},
		{name: "a key given is used", key: "kubeconfig", wantKey: "kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Secret("ops", "target", tc.key, []byte("k"))
			if string(s.Data[tc.wantKey]) != "k" || len(s.Data) != 1 {
				t.Errorf("data = %v, want only key %q", s.Data, tc.wantKey)
			}
		})
	}
}

func TestAccessOf(t *testing.T) {
	t.Run("asks for the first verb on the first resource and subresource of the first group", func(t *testing.T) {
		spec := accessOf(rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale", "deployments"}, Verbs: []string{"patch", "get"}})
		ra := spec.ResourceAttributes
		if ra == nil || ra.Group != "apps" || ra.Resource != "deployments" || ra.Subresource != "scale" || ra.Verb != "patch" {
			t.Errorf("resource attributes = %+v", ra)
		}
	})
}
