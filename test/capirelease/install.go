package capirelease

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/gomodule"
	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/podprocess"
)

// ProcessFinalizer holds the pod a manager process runs for until the
// process has exited (see package podprocess).
const ProcessFinalizer = "capirelease.move-operator.test/process"

// Options tune Install. The zero value is a good default.
type Options struct {
	// Replicas of every provider Deployment. Default 1. One process runs
	// per Deployment however many pods are Ready (leader election would
	// leave the others idle anyway).
	Replicas int32
	// Timeout bounds Install once the binaries are found or built.
	// Default 3m.
	Timeout time.Duration
	// Logf receives progress lines, e.g. testing.T.Logf. Default: discarded.
	Logf func(format string, args ...any)
}

// Installation is Cluster API at Version installed in one local cluster,
// and the harness that runs its managers.
type Installation struct {
	// Cluster is the local cluster it is installed in.
	Cluster *localcluster.Cluster
	// Version is the installed Cluster API release.
	Version string
	// Providers lists core, kubeadm bootstrap and kubeadm control plane, in
	// that order.
	Providers []*Provider
	// BuildDuration is how long finding the binaries took (building them,
	// the first time on a machine).
	BuildDuration time.Duration
	// Duration is how long the install took, the binaries apart.
	Duration time.Duration

	stopOnce sync.Once
	stopErr  error
}

// Provider is one installed provider: its Deployment, the Service its
// webhooks are called at, and the process of its released manager.
type Provider struct {
	// Name is clusterctl's name of the provider instance and the value of
	// the cluster.x-k8s.io/provider label, e.g. "bootstrap-kubeadm".
	Name string
	// Type is the clusterctl provider type, e.g. BootstrapProvider.
	Type clusterctlv1.ProviderType
	// Version is the installed version.
	Version string
	// Namespace holds the provider's Deployment, Service and ServiceAccount.
	Namespace string
	// Deployment is the name of the manager Deployment.
	Deployment string
	// ServiceAccount is the identity the manager runs as.
	ServiceAccount string
	// WebhookService is the name of the Service the webhook configurations
	// and CRD conversion settings point at.
	WebhookService string
	// ClusterIP is the Service's fixed ClusterIP, served on port 443 while
	// the manager process is ready.
	ClusterIP string
	// Binary is the released manager binary.
	Binary string
	// LogPath is the file the manager's output goes to, every run.
	LogPath string

	spec        *providerSpec
	podSelector labels.Selector
	certDir     string
	runDir      string
	endpoint    *serviceEndpoint
	runner      *podprocess.Runner
	cluster     *localcluster.Cluster
	clientset   kubernetes.Interface

	mu sync.Mutex
	// ports are the loopback ports of each pod's run, by pod UID.
	ports map[string]runPorts
}

// Install installs Cluster API at Version into c as `clusterctl init`
// (with CLUSTER_TOPOLOGY=true) leaves it, builds the released managers if
// they are not cached yet, runs each while its Deployment has a Ready pod,
// and returns once every Deployment is Available, every manager serves its
// webhooks at its Service, and every Cluster API type has been read once.
// Stopping the cluster stops the installation too.
func Install(ctx context.Context, c *localcluster.Cluster, opts Options) (_ *Installation, err error) {
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	binaries, built, err := Binaries(ctx)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	moduleDir, err := gomodule.Download(ctx, modulePath, Version)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", c, err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", c, err)
	}
	ca, err := capiprovider.NewWebhookCA(c.Name + "-capi-" + Version + "-webhook-ca")
	if err != nil {
		return nil, err
	}

	inst := &Installation{Cluster: c, Version: Version, BuildDuration: built}
	c.AddStopHook(inst.Stop)
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("installing Cluster API %s into %s: %w", Version, c, err), inst.Stop())
		}
	}()

	objs, err := inventoryCRD(moduleDir)
	if err != nil {
		return nil, err
	}
	for _, spec := range providerSpecs {
		rendered, err := capiprovider.RenderRelease(moduleDir, spec.configDir, spec.clusterctlName, spec.providerType, Version)
		if err != nil {
			return nil, err
		}
		p := &Provider{
			Name: spec.name, Type: spec.providerType, Version: Version,
			Binary: binaries[spec.name], LogPath: filepath.Join(c.LogDir, spec.manager.binary+"-"+Version+".log"),
			spec: spec, cluster: c, clientset: cs, ports: map[string]runPorts{},
		}
		provObjs, err := p.fit(rendered, ca, opts.Replicas)
		if err != nil {
			return nil, err
		}
		objs = append(objs, provObjs...)
		inst.Providers = append(inst.Providers, p)
	}
	for _, p := range inst.Providers {
		if err := p.start(ctx); err != nil {
			return nil, err
		}
	}
	prepared := time.Since(began)
	if err := capiprovider.ApplyInPhases(ctx, cl, objs); err != nil {
		return nil, err
	}
	applied := time.Since(began)
	for _, p := range inst.Providers {
		if err := waitAvailable(ctx, cl, p, opts.Replicas); err != nil {
			return nil, err
		}
		if err := p.WaitServing(ctx, true); err != nil {
			return nil, err
		}
	}
	serving := time.Since(began)
	if err := capiprovider.WarmUp(ctx, cl, objs); err != nil {
		return nil, err
	}
	inst.Duration = time.Since(began)
	opts.Logf("Cluster API %s installed in %s in %s (binaries found in %s; prepared %s, applied %s, managers serving %s, warmed up %s)",
		Version, c.Name, inst.Duration.Round(time.Millisecond), built.Round(time.Microsecond), prepared.Round(time.Millisecond),
		applied.Round(time.Millisecond), serving.Round(time.Millisecond), inst.Duration.Round(time.Millisecond))
	return inst, nil
}

// inventoryCRD is clusterctl's inventory CRD as the release's clusterctl
// installs it.
func inventoryCRD(moduleDir string) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(moduleDir, "cmd", "clusterctl", "config", "manifest", "clusterctl-api.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the clusterctl inventory CRD: %w", err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	for _, o := range objs {
		// clusterctl labels its inventory CRD only with this.
		o.SetLabels(map[string]string{clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue})
	}
	return objs, nil
}

func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// fit makes a provider's release objects fit the cluster, and returns them
// with what cert-manager and clusterctl would add: the Service at a fixed
// ClusterIP, CA bundles (cert-manager's cainjector), the serving
// certificate Secret (cert-manager), pods on kwok's nodes, clusterctl's
// inventory entry. It also writes the serving certificate where the
// manager process reads it, as the Secret is mounted into its pod.
func (p *Provider) fit(objs []*unstructured.Unstructured, ca *capiprovider.WebhookCA, replicas int32) ([]*unstructured.Unstructured, error) {
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			p.Namespace = o.GetName()
		case "Deployment":
			p.Deployment = o.GetName()
			p.ServiceAccount, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
		case "Service":
			p.WebhookService = o.GetName()
		}
	}
	if p.Namespace == "" || p.Deployment == "" || p.WebhookService == "" || p.ServiceAccount == "" {
		return nil, fmt.Errorf("manifests of provider %s %s lack a Namespace, Deployment, ServiceAccount or Service", p.Name, p.Version)
	}
	clusterIP, err := p.cluster.ServiceIP(p.spec.serviceHost)
	if err != nil {
		return nil, err
	}
	p.ClusterIP = clusterIP
	p.endpoint = newServiceEndpoint(clusterIP + ":443")
	cert, err := ca.Issue(p.WebhookService, p.Namespace, clusterIP)
	if err != nil {
		return nil, err
	}
	p.runDir = filepath.Join(p.cluster.Dir, "capi-"+Version, p.Name)
	p.certDir = filepath.Join(p.runDir, "serving-certs")
	if err := os.MkdirAll(p.certDir, 0o700); err != nil {
		return nil, err
	}
	if err := cert.WriteFiles(p.certDir); err != nil {
		return nil, fmt.Errorf("writing the serving certificate of provider %s: %w", p.Name, err)
	}
	caBundle := base64.StdEncoding.EncodeToString(ca.CertPEM())
	certSecret := ""
	for _, o := range objs {
		switch o.GetKind() {
		case "Service":
			_ = unstructured.SetNestedField(o.Object, clusterIP, "spec", "clusterIP")
			_ = unstructured.SetNestedStringSlice(o.Object, []string{clusterIP}, "spec", "clusterIPs")
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			if len(sel) == 0 {
				return nil, fmt.Errorf("webhook Service %s/%s of provider %s has no selector", p.Namespace, p.WebhookService, p.Name)
			}
			p.podSelector = labels.SelectorFromSet(sel)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				if hook, ok := h.(map[string]any); ok {
					if cc, ok := hook["clientConfig"].(map[string]any); ok {
						cc["caBundle"] = caBundle
					}
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
		case "CustomResourceDefinition":
			if strategy, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); strategy == "Webhook" {
				_ = unstructured.SetNestedField(o.Object, caBundle, "spec", "conversion", "webhook", "clientConfig", "caBundle")
			}
		case "Deployment":
			if err := capiprovider.PlaceOnFakeNodes(o, replicas); err != nil {
				return nil, fmt.Errorf("deployment of provider %s: %w", p.Name, err)
			}
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range volumes {
				if vm, ok := v.(map[string]any); ok {
					if name, ok, _ := unstructured.NestedString(vm, "secret", "secretName"); ok {
						certSecret = name
					}
				}
			}
		}
	}
	if certSecret == "" {
		return nil, fmt.Errorf("deployment %s/%s of provider %s mounts no serving certificate Secret", p.Namespace, p.Deployment, p.Name)
	}
	return append(objs, servingCertSecret(p.Namespace, certSecret, cert, caBundle), p.inventoryEntry()), nil
}

// servingCertSecret is the Secret cert-manager writes for the Certificate
// the release asks for, and the manager's pod mounts.
func servingCertSecret(namespace, name string, cert *capiprovider.ServingCert, caBundle string) *unstructured.Unstructured {
	s := &unstructured.Unstructured{}
	s.SetAPIVersion("v1")
	s.SetKind("Secret")
	s.SetNamespace(namespace)
	s.SetName(name)
	_ = unstructured.SetNestedField(s.Object, string(corev1.SecretTypeTLS), "type")
	_ = unstructured.SetNestedStringMap(s.Object, map[string]string{
		"tls.crt": base64.StdEncoding.EncodeToString(cert.CertPEM),
		"tls.key": base64.StdEncoding.EncodeToString(cert.KeyPEM),
		"ca.crt":  caBundle,
	}, "data")
	return s
}

// inventoryEntry is clusterctl's inventory entry of the provider.
func (p *Provider) inventoryEntry() *unstructured.Unstructured {
	inv := &unstructured.Unstructured{}
	inv.SetAPIVersion(clusterctlv1.GroupVersion.String())
	inv.SetKind("Provider")
	inv.SetNamespace(p.Namespace)
	inv.SetName(p.Name)
	inv.SetLabels(map[string]string{
		clusterctlv1.ClusterctlLabel:     "",
		capiprovider.ProviderLabel:       p.Name,
		clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue,
	})
	_ = unstructured.SetNestedField(inv.Object, p.spec.clusterctlName, "providerName")
	_ = unstructured.SetNestedField(inv.Object, string(p.Type), "type")
	_ = unstructured.SetNestedField(inv.Object, p.Version, "version")
	return inv
}

func waitAvailable(ctx context.Context, cl client.Client, p *Provider, replicas int32) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Deployment}, d); err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= replicas, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Deployment %s/%s of provider %s to become Available: %w", p.Namespace, p.Deployment, p.Name, err)
	}
	return nil
}

// Provider returns the installed provider named name (CoreProvider etc.),
// or nil.
func (i *Installation) Provider(name string) *Provider {
	for _, p := range i.Providers {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Stop stops every manager process (SIGTERM, SIGKILL after a short grace)
// and closes every Service endpoint. It is safe to call more than once;
// stopping the cluster calls it too.
func (i *Installation) Stop() error {
	i.stopOnce.Do(func() {
		var errs []error
		for _, p := range i.Providers {
			if p.runner != nil {
				p.runner.Stop()
			}
			if p.endpoint != nil {
				errs = append(errs, p.endpoint.closeNow())
			}
		}
		i.stopErr = errors.Join(errs...)
	})
	return i.stopErr
}
