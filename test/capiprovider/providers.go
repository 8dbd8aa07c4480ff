package capiprovider

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Provider names as clusterctl writes them into the cluster.x-k8s.io/provider
// label and names the inventory Provider objects.
const (
	CoreProvider                = "cluster-api"
	KubeadmBootstrapProvider    = "bootstrap-kubeadm"
	KubeadmControlPlaneProvider = "control-plane-kubeadm"
	LoopInfrastructureProvider  = "infrastructure-loop"
)

// LoopProviderVersion is the version the inventory records for the test
// infrastructure provider.
const LoopProviderVersion = "v0.1.0"

// providerSpec says where a provider's manifests come from and which webhooks
// its controller Deployment serves.
type providerSpec struct {
	name         string // clusterctl provider name, e.g. "kubeadm"
	providerType clusterctlv1.ProviderType
	// configDir is the kustomize base that `clusterctl init` installs
	// (release manifests are `kustomize build` of it).
	configDir string
	// loop marks the project's own provider, whose bases are embedded here.
	loop bool
	// capd marks CAPD, whose bases are in Cluster API's test module, and
	// which is installed only with Options.InMemory.
	capd bool
	// serviceHost is the host number of the webhook Service's fixed ClusterIP
	// in the cluster's Service range.
	serviceHost int
	// setupWebhooks registers the provider's admission and conversion
	// webhooks on mgr; reader reads the cluster directly.
	setupWebhooks func(mgr manager.Manager, reader client.Reader) error
	// newManager builds the provider's controllers as its main.go does
	// (see managers.go).
	newManager func(ctx context.Context, cfg *rest.Config, env *controllerEnv) (manager.Manager, error)
}

func (s *providerSpec) manifestLabel() string {
	return clusterctlv1.ManifestLabel(s.name, s.providerType)
}

var providerSpecs = []*providerSpec{
	{name: "cluster-api", providerType: clusterctlv1.CoreProviderType, configDir: "core/config/default",
		serviceHost: 10, setupWebhooks: setupCoreWebhooks, newManager: newCoreManager},
	{name: "kubeadm", providerType: clusterctlv1.BootstrapProviderType, configDir: "bootstrap/kubeadm/config/default",
		serviceHost: 11, setupWebhooks: setupKubeadmBootstrapWebhooks, newManager: newKubeadmBootstrapManager},
	{name: "kubeadm", providerType: clusterctlv1.ControlPlaneProviderType, configDir: "controlplane/kubeadm/config/default",
		serviceHost: 12, setupWebhooks: setupKubeadmControlPlaneWebhooks, newManager: newKubeadmControlPlaneManager},
	{name: "loop", providerType: clusterctlv1.InfrastructureProviderType, configDir: "default", loop: true,
		serviceHost: 13, setupWebhooks: setupLoopWebhooks, newManager: newLoopManager},
}

// components are a provider's objects as `clusterctl init` applies them,
// before the per-cluster touches (CA bundles, ClusterIPs, pod placement).
type components struct {
	spec       *providerSpec
	version    string
	objs       []*unstructured.Unstructured
	namespace  string
	deployment string
	service    string
}

var rendered struct {
	once  sync.Once
	comps []*components
	err   error
}

// renderedComponents renders every provider once per process; Install
// deep-copies the result.
func renderedComponents(ctx context.Context) ([]*components, error) {
	rendered.once.Do(func() {
		rendered.comps, rendered.err = renderAll(ctx)
	})
	return rendered.comps, rendered.err
}

func renderAll(ctx context.Context) ([]*components, error) {
	capiDir, capiVersion, err := capiModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	capiFS := os.DirFS(capiDir)
	loopFS, err := fs.Sub(loopConfig, "loopconfig")
	if err != nil {
		return nil, err
	}
	capdDir, capdVersion, err := findCAPDModule(ctx)
	if err != nil {
		return nil, err
	}
	var all []*components
	for _, spec := range append(providerSpecs, dockerSpec) {
		fsys, version := capiFS, capiVersion
		switch {
		case spec.loop:
			fsys, version = loopFS, LoopProviderVersion
		case spec.capd:
			fsys, version = os.DirFS(capdDir), capdVersion
		}
		objs, err := render(fsys, spec.configDir)
		if err != nil {
			return nil, fmt.Errorf("rendering the manifests of provider %s: %w", spec.manifestLabel(), err)
		}
		c := &components{spec: spec, version: version, objs: objs}
		clusterctlProcess(c)
		if err := c.index(); err != nil {
			return nil, err
		}
		all = append(all, c)
	}
	return all, nil
}

// index finds the objects the harness needs by kind.
func (c *components) index() error {
	for _, o := range c.objs {
		switch o.GetKind() {
		case "Namespace":
			c.namespace = o.GetName()
		case "Deployment":
			c.deployment = o.GetName()
		case "Service":
			c.service = o.GetName()
		}
	}
	if c.namespace == "" || c.deployment == "" || c.service == "" {
		return fmt.Errorf("manifests of provider %s lack a Namespace, Deployment or Service", c.spec.manifestLabel())
	}
	return nil
}

var variablePattern = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:=([^}]*))?\}`)

// variableOverrides are the clusterctl variables a user of these clusters
// would set: ClusterClass support is on, since the fleet uses it and the
// webhooks served in-process run with the ClusterTopology gate enabled.
var variableOverrides = map[string]string{"CLUSTER_TOPOLOGY": "true"}

// clusterctlProcess does what clusterctl does to release manifests before
// applying them: substitute variables, add its labels, and (as the release
// process does) point images at the release registry and tag.
func clusterctlProcess(c *components) {
	for _, o := range c.objs {
		o.Object = substituteVariables(o.Object).(map[string]any)
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[clusterctlv1.ClusterctlLabel] = ""
		labels["cluster.x-k8s.io/provider"] = c.spec.manifestLabel()
		o.SetLabels(labels)
		if o.GetKind() == "Deployment" {
			setReleaseImages(o, c.version)
		}
	}
}

func substituteVariables(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = substituteVariables(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = substituteVariables(e)
		}
		return v
	case string:
		return variablePattern.ReplaceAllStringFunc(v, func(m string) string {
			sub := variablePattern.FindStringSubmatch(m)
			if value, ok := variableOverrides[sub[1]]; ok {
				return value
			}
			return sub[3]
		})
	default:
		return v
	}
}

func setReleaseImages(deployment *unstructured.Unstructured, version string) {
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		container, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if image, ok := container["image"].(string); ok {
			image = strings.Replace(image, "gcr.io/k8s-staging-cluster-api/", "registry.k8s.io/cluster-api/", 1)
			if i := strings.LastIndex(image, ":"); i > 0 {
				image = image[:i+1] + version
			}
			container["image"] = image
		}
		container["imagePullPolicy"] = "IfNotPresent"
	}
	_ = unstructured.SetNestedSlice(deployment.Object, containers, "spec", "template", "spec", "containers")
}

// deepCopy returns copies of the objects, for one cluster.
func (c *components) deepCopy() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(c.objs))
	for i, o := range c.objs {
		out[i] = o.DeepCopy()
	}
	return out
}
