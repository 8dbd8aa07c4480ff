package capiprovider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What this file exports serves harnesses that install another release of
// Cluster API than the one this module builds with, and run its released
// binaries instead of serving its webhooks in-process (package
// capirelease): the same rendering of release manifests, the same install
// order and the same certificate authority as Install's.

// RenderRelease renders a provider's kustomize base configDir (e.g.
// "bootstrap/kubeadm/config/default") inside the source of a Cluster API
// module at moduleDir as `clusterctl init` applies that provider's release
// manifests: kustomize build without cert-manager's kinds, clusterctl's
// variables (with ClusterTopology on, as Install has it), its labels
// (clusterctlName and providerType name the provider, e.g. "kubeadm" and
// BootstrapProvider), and the release images of version. Cluster API has
// laid its bases out the same way since v1.10 (the core's at config/ before
// v1.14, at core/config/ since).
func RenderRelease(moduleDir, configDir, clusterctlName string, providerType clusterctlv1.ProviderType, version string) ([]*unstructured.Unstructured, error) {
	spec := &providerSpec{name: clusterctlName, providerType: providerType, configDir: configDir}
	objs, err := render(os.DirFS(moduleDir), configDir)
	if err != nil {
		return nil, fmt.Errorf("rendering the manifests of provider %s %s: %w", spec.manifestLabel(), version, err)
	}
	c := &components{spec: spec, version: version, objs: objs}
	clusterctlProcess(c)
	return c.objs, nil
}

// ApplyInPhases creates objs in the order clusterctl applies a provider's
// components (namespaces, CRDs established before anything else, RBAC,
// Secrets and Services, then Deployments and webhook configurations, the
// inventory last), as Install does.
func ApplyInPhases(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	return applyInPhases(ctx, cl, objs)
}

// WarmUp lists every custom resource type whose CRD is among objs once, at
// its storage version, so that nobody meets the 429 a fresh API server
// answers while a type's watch cache initialises.
func WarmUp(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	return warmUp(ctx, cl, objs)
}

// PlaceOnFakeNodes sets a release Deployment's replicas and lets its pods
// run on kwok's fake nodes, the one change a local cluster needs.
func PlaceOnFakeNodes(deployment *unstructured.Unstructured, replicas int32) error {
	return placeOnFakeNodes(deployment, replicas)
}

// WebhookCA plays cert-manager's part for one cluster, as Install's does:
// it signs each provider's webhook serving certificate, and its
// certificate is the caBundle of webhook configurations and CRD conversion
// settings.
type WebhookCA struct {
	ca *certificateAuthority
}

// NewWebhookCA creates a certificate authority named name.
func NewWebhookCA(name string) (*WebhookCA, error) {
	ca, err := newCertificateAuthority(name)
	if err != nil {
		return nil, err
	}
	return &WebhookCA{ca: ca}, nil
}

// CertPEM is the authority's certificate, the caBundle to inject.
func (w *WebhookCA) CertPEM() []byte { return w.ca.certPEM }

// ServingCert is a webhook serving certificate and its key, PEM-encoded.
type ServingCert struct {
	CertPEM, KeyPEM []byte
}

// Issue signs a serving certificate for the Service namespace/service at
// clusterIP: the API server verifies the name <service>.<namespace>.svc
// when it calls a webhook.
func (w *WebhookCA) Issue(service, namespace, clusterIP string) (*ServingCert, error) {
	cert, err := w.ca.issue(service, namespace, clusterIP)
	if err != nil {
		return nil, err
	}
	return &ServingCert{CertPEM: cert.certPEM, KeyPEM: cert.keyPEM}, nil
}

// WriteFiles writes tls.crt and tls.key into dir, as cert-manager's Secret
// is mounted into a webhook server's pod.
func (s *ServingCert) WriteFiles(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), s.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), s.KeyPEM, 0o600)
}
