package capiprovider

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"   //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	controlplaneadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"
	infrav1beta1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/move-operator/move-operator/internal/convert"
)

// The webhooks served are the real ones: the admission and conversion code of
// the sigs.k8s.io/cluster-api module, registered exactly as each provider's
// main.go registers it, on a controller-runtime Manager that is never started
// (no controllers run; the Manager is only what the webhook builders need).

// NewScheme returns a scheme with every type of the management setup: the
// Kubernetes built-ins, CRDs, all served versions of the Cluster API kinds
// (core, addons, IPAM, runtime, kubeadm bootstrap and control plane) and the
// clusterctl inventory, and CAPD's kinds.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		clusterv1beta1.AddToScheme, clusterv1.AddToScheme,
		addonsv1beta1.AddToScheme, addonsv1.AddToScheme,
		runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
		ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme,
		bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme,
		controlplanev1beta1.AddToScheme, controlplanev1.AddToScheme,
		clusterctlv1.AddToScheme,
		infrav1beta1.AddToScheme, infrav1.AddToScheme,
	} {
		utilruntimeMust(add(s))
	}
	return s
}

func utilruntimeMust(err error) {
	if err != nil {
		panic(err)
	}
}

// providerSchemes mirror the schemes of each provider's main.go, so a
// provider's conversion webhook knows exactly the kinds it knows in a release.
func coreScheme() *runtime.Scheme {
	return schemeOf(clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		clusterv1beta1.AddToScheme, clusterv1.AddToScheme, addonsv1beta1.AddToScheme, addonsv1.AddToScheme,
		runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
		ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme)
}

func bootstrapScheme() *runtime.Scheme {
	return schemeOf(clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme,
		bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme)
}

func controlPlaneScheme() *runtime.Scheme {
	return schemeOf(clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1beta1.AddToScheme,
		controlplanev1.AddToScheme, bootstrapv1.AddToScheme, apiextensionsv1.AddToScheme, runtimev1.AddToScheme)
}

func schemeOf(adds ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range adds {
		utilruntimeMust(add(s))
	}
	return s
}

type webhookSetup interface {
	SetupWebhookWithManager(mgr manager.Manager) error
}

func setupAll(mgr manager.Manager, hooks ...webhookSetup) error {
	for _, h := range hooks {
		if err := h.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("registering webhook %T: %w", h, err)
		}
	}
	return nil
}

func setupCoreWebhooks(mgr manager.Manager, reader client.Reader) error {
	return setupAll(mgr,
		&coreadmission.ClusterClass{Client: indexedReader{reader}},
		&coreadmission.Cluster{Client: reader, ClusterCacheReader: unreachableWorkloadClusters{}},
		&coreadmission.Machine{},
		&coreadmission.MachineSet{},
		&coreadmission.MachineDeployment{},
		&coreadmission.MachineDrainRule{},
		&coreadmission.MachinePool{},
		&coreadmission.ClusterResourceSet{},
		&coreadmission.ClusterResourceSetBinding{},
		&coreadmission.MachineHealthCheck{},
		&coreadmission.ExtensionConfig{},
		&coreadmission.IPAddress{Client: reader},
		&coreadmission.IPAddressClaim{},
	)
}

func setupKubeadmBootstrapWebhooks(mgr manager.Manager, _ client.Reader) error {
	return setupAll(mgr, &bootstrapadmission.KubeadmConfig{}, &bootstrapadmission.KubeadmConfigTemplate{})
}

func setupKubeadmControlPlaneWebhooks(mgr manager.Manager, reader client.Reader) error {
	return setupAll(mgr,
		&controlplaneadmission.KubeadmControlPlane{},
		&controlplaneadmission.ScaleValidator{Client: reader},
		&controlplaneadmission.KubeadmControlPlaneTemplate{},
	)
}

// providerSchemeFor picks the scheme a provider's manager runs with.
func providerSchemeFor(spec *providerSpec) *runtime.Scheme {
	switch spec.manifestLabel() {
	case CoreProvider:
		return coreScheme()
	case KubeadmBootstrapProvider:
		return bootstrapScheme()
	case KubeadmControlPlaneProvider:
		return controlPlaneScheme()
	case DockerInfrastructureProvider:
		return dockerScheme()
	default:
		return schemeOf(clientgoscheme.AddToScheme)
	}
}

// unreachableWorkloadClusters answers as CAPI's ClusterCache does for a
// workload cluster it cannot reach, which the simulated ones never are.
type unreachableWorkloadClusters struct{}

func (unreachableWorkloadClusters) GetReader(context.Context, client.ObjectKey) (client.Reader, error) {
	return nil, clustercache.ErrClusterNotConnected
}

// newWebhookHandler builds the http.Handler serving one provider's webhooks
// against the cluster at cfg.
func newWebhookHandler(spec *providerSpec, cfg *rest.Config) (http.Handler, error) {
	scheme := providerSchemeFor(spec)
	mux := &muxServer{mux: http.NewServeMux()}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		WebhookServer:          mux,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the webhook manager of provider %s: %w", spec.manifestLabel(), err)
	}
	reader, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the webhook client of provider %s: %w", spec.manifestLabel(), err)
	}
	if err := spec.setupWebhooks(mgr, reader); err != nil {
		return nil, fmt.Errorf("registering the webhooks of provider %s: %w", spec.manifestLabel(), err)
	}
	return mux.mux, nil
}

// muxServer is a webhook.Server that only collects handlers: the harness
// serves them itself, on the Service's ClusterIP, and only while the
// provider's Deployment has Ready pods.
type muxServer struct {
	mux *http.ServeMux
}

var _ webhook.Server = &muxServer{}

func (s *muxServer) NeedLeaderElection() bool                { return false }
func (s *muxServer) Register(path string, hook http.Handler) { s.mux.Handle(path, hook) }
func (s *muxServer) Start(ctx context.Context) error         { <-ctx.Done(); return nil }
func (s *muxServer) StartedChecker() healthz.Checker         { return healthz.Ping }
func (s *muxServer) WebhookMux() *http.ServeMux              { return s.mux }

var processWide struct {
	once sync.Once
	err  error
}

// configureProcessWide sets what the Cluster API webhook packages keep in
// package variables, once per process: feature gates, and how conversions
// find the API version of a referenced kind.
func configureProcessWide(comps []*components) error {
	processWide.once.Do(func() {
		// As `clusterctl init` with CLUSTER_TOPOLOGY=true: the fleet has
		// ClusterClass-based clusters. MachinePool is on by default.
		if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
			processWide.err = fmt.Errorf("enabling the ClusterTopology feature gate: %w", err)
			return
		}
		// Through package convert, which the operator running in the
		// same process converts back with: it answers the operator's
		// conversions itself and the webhooks' with this getter.
		convert.SetWebhookReferenceVersions(newAPIVersionGetter(comps))
	})
	return processWide.err
}

// newAPIVersionGetter answers as CAPI's contract.GetAPIVersion does: the
// latest API version the CRD of a kind lists for the current contract (label
// cluster.x-k8s.io/<contract>). The real one reads the CRD from the cluster;
// every local cluster carries the same CRDs, so they are read from the
// rendered manifests instead, which keeps the process-wide getter independent
// of any one cluster being up.
func newAPIVersionGetter(comps []*components) func(context.Context, schema.GroupKind) (string, error) {
	versions := map[schema.GroupKind]string{}
	for _, c := range comps {
		for _, o := range c.objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			group, _, _ := unstructuredString(o, "spec", "group")
			kind, _, _ := unstructuredString(o, "spec", "names", "kind")
			for _, contract := range []string{"v1beta2", "v1beta1"} {
				if v := o.GetLabels()[clusterv1.GroupVersion.Group+"/"+contract]; v != "" {
					candidates := strings.Split(v, "_")
					sort.Slice(candidates, func(i, j int) bool {
						return version.CompareKubeAwareVersionStrings(candidates[i], candidates[j]) > 0
					})
					versions[schema.GroupKind{Group: group, Kind: kind}] = candidates[0]
					break
				}
			}
		}
	}
	return func(_ context.Context, gk schema.GroupKind) (string, error) {
		v, ok := versions[gk]
		if !ok {
			return "", fmt.Errorf("failed to get apiVersion for kind %s: no CRD with contract version labels", gk.Kind)
		}
		return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
	}
}
