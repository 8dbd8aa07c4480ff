package capiprovider

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/test/infrastructure/container"
	infrav1beta1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta1" //nolint:staticcheck // still served: the conversion webhooks convert from it, as in a release
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	dockercontrollers "sigs.k8s.io/cluster-api/test/infrastructure/docker/controllers"
	dockerwebhooks "sigs.k8s.io/cluster-api/test/infrastructure/docker/webhooks"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/move-operator/move-operator/test/gomodule"
)

// CAPD, Cluster API's own development infrastructure provider
// (sigs.k8s.io/cluster-api/test/infrastructure/docker), installed as
// `clusterctl init --infrastructure docker` installs it, and run with its
// in-memory backend only: DevCluster and DevMachine with
// spec.backend.inMemory, whose VMs, Nodes, etcd members and API servers
// live in an in-memory cloud (package inmemorycloud) instead of containers.
// It is the provider nobody here wrote, with its own CRDs (v1beta1 and
// v1beta2, converted by its webhook), defaulting and validating webhooks,
// finalizers and delete path.
//
// Its manager is built as its main.go builds it (scheme, cache, client,
// ClusterCache, CRD migrator, the Dev reconcilers with their default
// concurrency), with the differences every provider here has (managers.go),
// and these:
//
//   - Only the DevCluster and DevMachine reconcilers run. The Docker
//     reconcilers need a Docker engine, and nothing here creates
//     DockerClusters. The DevMachineTemplate reconciler asks the Docker
//     engine for its capacity before it looks at the backend, so without
//     one it fails every reconcile and writes nothing; it does nothing for
//     the in-memory backend. The in-memory backend has no machine pools.
//   - The in-memory cloud is not the process's: it is shared by both
//     management clusters and outlives the provider (see inmemorycloud).

// Provider name and version of CAPD as the inventory and labels name it.
const (
	DockerInfrastructureProvider = "infrastructure-docker"
	dockerProviderName           = "docker"
)

// The DevCluster kinds, for fleets and checks.
var DevGroupVersion = infrav1.GroupVersion

const (
	DevClusterKind         = "DevCluster"
	DevClusterTemplateKind = "DevClusterTemplate"
	DevMachineKind         = "DevMachine"
	DevMachineTemplateKind = "DevMachineTemplate"
)

// capiTestModulePath is the module CAPD ships in.
const capiTestModulePath = "sigs.k8s.io/cluster-api/test"

// capdAnchor is a function of the CAPD module compiled into this binary,
// defined in capdAnchorFile (relative to the module root).
var capdAnchor = (*dockerwebhooks.DevCluster).SetupWebhookWithManager

const capdAnchorFile = "infrastructure/docker/webhooks/alias.go"

func findCAPDModule(ctx context.Context) (string, string, error) {
	return gomodule.Dir(ctx, capiTestModulePath, capdAnchor, capdAnchorFile)
}

// dockerSpec is CAPD as a provider: installed only with Options.InMemory.
var dockerSpec = &providerSpec{
	name: dockerProviderName, providerType: clusterctlv1.InfrastructureProviderType,
	configDir: "infrastructure/docker/config/default", capd: true,
	serviceHost: 14, setupWebhooks: setupDockerWebhooks, newManager: newDockerManager,
}

// dockerScheme is the scheme of CAPD's main.go.
func dockerScheme() *runtime.Scheme {
	return schemeOf(clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		infrav1beta1.AddToScheme, infrav1.AddToScheme, clusterv1.AddToScheme)
}

// setupDockerWebhooks registers CAPD's defaulting, validating and (through
// the builder, for its hub types) conversion webhooks, as its main.go does.
func setupDockerWebhooks(mgr manager.Manager, _ client.Reader) error {
	return setupAll(mgr,
		&dockerwebhooks.DockerMachine{}, &dockerwebhooks.DockerMachineTemplate{},
		&dockerwebhooks.DockerCluster{}, &dockerwebhooks.DockerClusterTemplate{},
		&dockerwebhooks.DevMachine{}, &dockerwebhooks.DevMachineTemplate{},
		&dockerwebhooks.DevCluster{}, &dockerwebhooks.DevClusterTemplate{},
	)
}

// Flag defaults of CAPD's main.go.
const devConcurrency = 50

func newDockerManager(ctx context.Context, cfg *rest.Config, env *controllerEnv) (manager.Manager, error) {
	const controllerName = "cluster-api-docker-controller-manager"
	if env.inMemory == nil {
		return nil, fmt.Errorf("CAPD's in-memory backend needs a cloud (ControllerOptions.InMemory)")
	}
	scheme := dockerScheme()
	mgr, err := ctrl.NewManager(providerConfig(cfg, controllerName), managerOptions(env, scheme, dockerCacheOptions(), dockerClientOptions()))
	if err != nil {
		return nil, err
	}
	secretCachingClient, err := client.New(mgr.GetConfig(), client.Options{HTTPClient: mgr.GetHTTPClient(), Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
	if err != nil {
		return nil, fmt.Errorf("creating the Secret caching client: %w", err)
	}
	runtimeClient, err := container.NewDockerClient()
	if err != nil {
		return nil, fmt.Errorf("creating the container runtime client (never called by the in-memory backend): %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Client: clustercache.ClientOptions{
			QPS: clusterCacheClientQPS, Burst: clusterCacheClientBurst,
			UserAgent: remote.DefaultClusterAPIUserAgent(controllerName),
			Cache:     clustercache.ClientCacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}},
		},
	}, concurrency(clusterCacheConcurrency))
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	shutdownAtExit(env, clusterCache)
	if err := setupDockerCRDMigrator(ctx, mgr); err != nil {
		return nil, err
	}
	if err := setupDevReconcilers(ctx, mgr, env, runtimeClient, clusterCache); err != nil {
		return nil, err
	}
	return mgr, nil
}

// dockerCacheOptions cache only the Secrets of clusters, as CAPD's main.go.
func dockerCacheOptions() ctrlcache.Options {
	req, _ := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	return ctrlcache.Options{
		SyncPeriod: ptr.To(syncPeriod),
		ByObject:   map[client.Object]ctrlcache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)}},
	}
}

func dockerClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		DisableFor:   []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}},
		Unstructured: true,
	}}
}

func setupDockerCRDMigrator(ctx context.Context, mgr manager.Manager) error {
	if err := (&crdmigrator.CRDMigrator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: map[client.Object]crdmigrator.ByObjectConfig{
		&infrav1.DockerCluster{}:         {UseCache: false, UseStatusForStorageVersionMigration: true}, //nolint:staticcheck // CAPD's main.go migrates the deprecated kinds too
		&infrav1.DockerClusterTemplate{}: {UseCache: false},                                            //nolint:staticcheck // CAPD's main.go migrates the deprecated kinds too
		&infrav1.DockerMachine{}:         {UseCache: false, UseStatusForStorageVersionMigration: true}, //nolint:staticcheck // CAPD's main.go migrates the deprecated kinds too
		&infrav1.DockerMachineTemplate{}: {UseCache: false},                                            //nolint:staticcheck // CAPD's main.go migrates the deprecated kinds too
		&infrav1.DevCluster{}:            {UseCache: false, UseStatusForStorageVersionMigration: true},
		&infrav1.DevClusterTemplate{}:    {UseCache: false},
		&infrav1.DevMachine{}:            {UseCache: false, UseStatusForStorageVersionMigration: true},
		&infrav1.DevMachineTemplate{}:    {UseCache: false},
	}}).SetupWithManager(ctx, mgr, concurrency(1)); err != nil {
		return fmt.Errorf("setting up the CRD migrator: %w", err)
	}
	return nil
}

func setupDevReconcilers(ctx context.Context, mgr manager.Manager, env *controllerEnv, rt container.Runtime, cc clustercache.ClusterCache) error {
	inMemory := env.inMemory.ManagerFor(env.cluster)
	if err := (&dockercontrollers.DevMachineReconciler{
		Client: mgr.GetClient(), ContainerRuntime: rt, ClusterCache: cc,
		InMemoryManager: inMemory, APIServerMux: env.inMemory.Mux(),
	}).SetupWithManager(ctx, mgr, ctrlOptions(devConcurrency, 5*time.Minute)); err != nil {
		return fmt.Errorf("setting up the DevMachine controller: %w", err)
	}
	if err := (&dockercontrollers.DevClusterReconciler{
		Client: mgr.GetClient(), ContainerRuntime: rt,
		InMemoryManager: inMemory, APIServerMux: env.inMemory.Mux(),
	}).SetupWithManager(ctx, mgr, concurrency(devConcurrency)); err != nil {
		return fmt.Errorf("setting up the DevCluster controller: %w", err)
	}
	return nil
}

func ctrlOptions(maxConcurrent int, timeout time.Duration) controller.Options {
	return controller.Options{MaxConcurrentReconciles: maxConcurrent, ReconciliationTimeout: timeout}
}
