package remote

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// validKubeconfig is self-contained; its CA is made at init.
var validKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: target
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: CA_DATA
users:
- name: admin
  user:
    token: secret-token-value
contexts:
- name: target
  context: {cluster: target, user: admin}
current-context: target
`

func init() {
	validKubeconfig = strings.Replace(validKubeconfig, "CA_DATA", base64.StdEncoding.EncodeToString(selfSignedCA()), 1)
}

func selfSignedCA() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestParseKubeconfig(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(string) string
		wantErr []string // substrings; none means it must parse
	}{
		{name: "a self-contained kubeconfig is accepted", edit: func(s string) string { return s }},
		{
			name:    "garbage is refused as unparsable",
			edit:    func(string) string { return "{{ not yaml" },
			wantErr: []string{"cannot be parsed"},
		},
		{
			name:    "a kubeconfig without current-context is refused",
			edit:    func(s string) string { return strings.Replace(s, "current-context: target", "", 1) },
			wantErr: []string{"no current-context"},
		},
		{
			name: "a current-context that is not defined is refused",
			edit: func(s string) string {
				return strings.Replace(s, "current-context: target", "current-context: other", 1)
			},
			wantErr: []string{`current-context "other"`},
		},
		{
			name: "an exec plugin is refused",
			edit: func(s string) string {
				return strings.Replace(s, "    token: secret-token-value", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws-iam-authenticator\n      interactiveMode: Never", 1)
			},
			wantErr: []string{"exec credential plugin", "aws-iam-authenticator", "self-contained"},
		},
		{
			name: "an auth-provider plugin is refused",
			edit: func(s string) string {
				return strings.Replace(s, "    token: secret-token-value", "    auth-provider:\n      name: oidc", 1)
			},
			wantErr: []string{"auth-provider plugin", "oidc"},
		},
		{
			name: "a CA that is not PEM is refused",
			edit: func(s string) string {
				return regexp.MustCompile(`certificate-authority-data: \S+`).ReplaceAllString(s, "certificate-authority-data: ZHVtbXk=")
			},
			wantErr: []string{"certificates that cannot be used"},
		},
		{
			name: "a certificate-authority file is refused",
			edit: func(s string) string {
				return regexp.MustCompile(`certificate-authority-data: \S+`).ReplaceAllString(s, "certificate-authority: /etc/ca.crt")
			},
			wantErr: []string{"certificate-authority file"},
		},
		{
			name: "client certificate and key files are refused",
			edit: func(s string) string {
				return strings.Replace(s, "    token: secret-token-value", "    client-certificate: /tls.crt\n    client-key: /tls.key", 1)
			},
			wantErr: []string{"client-certificate file", "client-key file"},
		},
		{
			name: "a token file is refused",
			edit: func(s string) string {
				return strings.Replace(s, "token: secret-token-value", "tokenFile: /var/run/token", 1)
			},
			wantErr: []string{"tokenFile"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseKubeconfig([]byte(tc.edit(validKubeconfig)), "Secret ns/target")
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ParseKubeconfig() error = %v", err)
				}
				if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret-token-value" {
					t.Fatalf("ParseKubeconfig() = host %q, want the kubeconfig's server and token", cfg.Host)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != movev1alpha1.ReasonInvalidKubeconfig {
				t.Fatalf("ParseKubeconfig() error = %v, want an *Error with reason %s", err, movev1alpha1.ReasonInvalidKubeconfig)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret-token-value") {
				t.Errorf("error %q leaks the token", err)
			}
		})
	}
}

func TestClientsGet(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "target"}, Data: data}
	}
	cases := []struct {
		name       string
		objects    []client.Object
		ref        movev1alpha1.SecretKeyReference
		wantReason string
	}{
		{name: "a missing Secret says how to create it", ref: movev1alpha1.SecretKeyReference{Name: "target"},
			wantReason: movev1alpha1.ReasonTargetSecretNotFound},
		{name: "a Secret without the key names the keys it has", objects: []client.Object{secret(map[string][]byte{"kubeconfig": []byte(validKubeconfig)})},
			ref: movev1alpha1.SecretKeyReference{Name: "target"}, wantReason: movev1alpha1.ReasonTargetSecretKeyNotFound},
		{name: "the key defaults to value", objects: []client.Object{secret(map[string][]byte{"value": []byte(validKubeconfig)})},
			ref: movev1alpha1.SecretKeyReference{Name: "target"}},
		{name: "another key is used when named", objects: []client.Object{secret(map[string][]byte{"kubeconfig": []byte(validKubeconfig)})},
			ref: movev1alpha1.SecretKeyReference{Name: "target", Key: "kubeconfig"}},
		{name: "a malformed kubeconfig is reported as invalid", objects: []client.Object{secret(map[string][]byte{"value": []byte("nope: [")})},
			ref: movev1alpha1.SecretKeyReference{Name: "target"}, wantReason: movev1alpha1.ReasonInvalidKubeconfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objects...).Build()
			clients := &Clients{Reader: reader, Scheme: scheme}
			target, err := clients.Get(context.Background(), "ops", tc.ref)
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("Get() error = %v", err)
				}
				if target.Server != "https://127.0.0.1:6443" {
					t.Errorf("Get().Server = %q", target.Server)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != tc.wantReason {
				t.Fatalf("Get() error = %v, want reason %s", err, tc.wantReason)
			}
		})
	}
}

func TestClientsAreReusedUntilTheSecretChanges(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "target"}, Data: map[string][]byte{"value": []byte(validKubeconfig)}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s).Build()
	clients := &Clients{Reader: reader, Scheme: scheme}
	ref := movev1alpha1.SecretKeyReference{Name: "target"}
	ctx := context.Background()

	first, err := clients.Get(ctx, "ops", ref)
	if err != nil {
		t.Fatal(err)
	}
	again, err := clients.Get(ctx, "ops", ref)
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Fatal("an unchanged Secret must give back the same client")
	}

	if err := reader.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	s.Data["value"] = []byte(strings.Replace(validKubeconfig, "127.0.0.1:6443", "127.0.0.2:6443", 1))
	if err := reader.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	changed, err := clients.Get(ctx, "ops", ref)
	if err != nil {
		t.Fatal(err)
	}
	if changed == first || changed.Server != "https://127.0.0.2:6443" {
		t.Fatalf("a changed Secret must give a new client for the new server, got %q", changed.Server)
	}
}

func TestARotatedTokenGivesANewClientAndOtherWritesToTheSecretDoNot(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "target"}, Data: map[string][]byte{"value": []byte(validKubeconfig)}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s).Build()
	clients := &Clients{Reader: reader, Scheme: scheme}
	ref := movev1alpha1.SecretKeyReference{Name: "target"}
	ctx := context.Background()
	first, err := clients.Get(ctx, "ops", ref)
	if err != nil {
		t.Fatal(err)
	}
	update := func(edit func(*corev1.Secret)) {
		t.Helper()
		if err := reader.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			t.Fatal(err)
		}
		edit(s)
		if err := reader.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a label or finalizer written to the Secret keeps the client", func(t *testing.T) {
		update(func(s *corev1.Secret) {
			s.Labels = map[string]string{"team": "platform"}
			s.Finalizers = []string{"move.cluster.x-k8s.io/in-use"}
		})
		again, err := clients.Get(ctx, "ops", ref)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Fatal("a Secret whose kubeconfig is unchanged must give back the same client")
		}
	})
	t.Run("a rotated token gives a new client with the new token", func(t *testing.T) {
		update(func(s *corev1.Secret) {
			s.Data["value"] = []byte(strings.Replace(validKubeconfig, "secret-token-value", "rotated-token-value", 1))
		})
		rotated, err := clients.Get(ctx, "ops", ref)
		if err != nil {
			t.Fatal(err)
		}
		if rotated == first || rotated.Config.BearerToken != "rotated-token-value" {
			t.Fatal("a rotated token must give a new client that sends it")
		}
	})
}
