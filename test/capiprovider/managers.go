package capiprovider

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	bootstrapsetup "sigs.k8s.io/cluster-api/bootstrap/kubeadm/setup"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	controlplanesetup "sigs.k8s.io/cluster-api/controlplane/kubeadm/setup"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourceset"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourcesetbinding"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	coresetup "sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/hostprovider"
	"github.com/move-operator/move-operator/test/inmemorycloud"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// The controllers run in-process are built as each provider's main.go (in
// the sigs.k8s.io/cluster-api module, v1.14) builds them, with its flags'
// defaults: the same scheme, cache and client options (core/setup,
// bootstrap/kubeadm/setup, controlplane/kubeadm/setup), indexes,
// ClusterCache, CRD migrator and reconcilers with their default
// concurrency. What differs, and why:
//
//   - No leader election, no metrics, health or webhook server (the harness
//     serves the webhooks itself, see webhooks.go), and no Kubernetes
//     version check.
//   - Controller names are not validated: the managers of two clusters run
//     in one process and share controller-runtime's metrics registry, so the
//     same name registers twice (controller.Options.SkipNameValidation).
//   - Feature gates are process-wide: ClusterTopology and MachinePool are
//     enabled once for the process (configureProcessWide), as every
//     provider here runs with the same gates.
//   - The graceful shutdown timeout is the pod's grace period, so a stop
//     behaves like SIGTERM followed by SIGKILL (see live.go).
//   - Logs go to one file per provider in the cluster's log directory; the
//     KubeadmControlPlane etcd client logs nowhere.

// Flag defaults of the providers' main.go.
const (
	syncPeriod                  = 10 * time.Minute
	restConfigQPS               = 100
	restConfigBurst             = 200
	clusterCacheClientQPS       = 20
	clusterCacheClientBurst     = 30
	clusterCacheConcurrency     = 100
	remoteConnectionGracePeriod = 50 * time.Second
	remoteConditionsGracePeriod = 5 * time.Minute
)

// controllerEnv is what building one provider's manager needs.
type controllerEnv struct {
	provider string
	logger   logr.Logger
	grace    time.Duration
	// For the loop provider.
	cloud    *cloud.Cloud
	cluster  string
	switches *loopprovider.Switches
	contract loopprovider.Contract
	activity *loopprovider.Activity
	// inMemory is the cloud of CAPD's in-memory backend (Options.InMemory).
	inMemory *inmemorycloud.Cloud
	// hosts, if set, runs the BareMetalHost controller with the loop
	// provider's and counts its reconciles (Options.Hosts).
	hosts *hostprovider.Activity
	// exits collects what the end of the process takes with it.
	exits *[]func()
}

// atExit registers f to run once the manager has stopped, for what a real
// process loses when it exits but an in-process manager keeps.
func (env *controllerEnv) atExit(f func()) {
	if env.exits != nil {
		*env.exits = append(*env.exits, f)
	}
}

// shutdownAtExit stops a ClusterCache's connections to the workload
// clusters when the process ends: their caches run on a context of their
// own, which a real process loses on exit, but which would leak (caches,
// watches, health checks) from a stopped in-process manager.
func shutdownAtExit(env *controllerEnv, cc clustercache.ClusterCache) {
	if s, ok := cc.(interface{ Shutdown() }); ok {
		env.atExit(s.Shutdown)
	}
}

// informerRuns numbers the managers built in this process.
var informerRuns atomic.Int64

// informerName names the informers of one manager. client-go requires
// informer names to be unique in the process (Cluster API's
// NewInformerFunc panics otherwise), and every run of every provider in
// every cluster here is another manager in the same process.
func (env *controllerEnv) informerName(controllerName string) string {
	return fmt.Sprintf("%s-%s-%d", controllerName, env.cluster, informerRuns.Add(1))
}

func concurrency(c int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: c}
}

// managerOptions are the options every provider's main.go passes to
// ctrl.NewManager, less the servers.
func managerOptions(env *controllerEnv, scheme *runtime.Scheme, cache ctrlcache.Options, cl client.Options) ctrl.Options {
	return ctrl.Options{
		Controller: config.Controller{
			UsePriorityQueue:   ptr.To(feature.Gates.Enabled(feature.PriorityQueue)),
			CacheSyncTimeout:   5 * time.Minute,
			SkipNameValidation: ptr.To(true),
		},
		Scheme:                  scheme,
		Cache:                   cache,
		Client:                  cl,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		WebhookServer:           &muxServer{},
		GracefulShutdownTimeout: ptr.To(env.grace),
		Logger:                  env.logger,
	}
}

func providerConfig(cfg *rest.Config, controllerName string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = restConfigQPS, restConfigBurst
	cfg.UserAgent = remote.DefaultClusterAPIUserAgent(controllerName)
	return cfg
}

func newCoreManager(ctx context.Context, cfg *rest.Config, env *controllerEnv) (manager.Manager, error) {
	const controllerName = "cluster-api-controller-manager"
	scheme := coreScheme()
	utilruntimeMust(storagev1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(providerConfig(cfg, controllerName), managerOptions(env, scheme,
		coresetup.ManagerCacheOptions(scheme, env.informerName(controllerName), "", syncPeriod), coresetup.ManagerClientOptions()))
	if err != nil {
		return nil, err
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("adding indexes: %w", err)
	}
	secretCachingClient, err := coresetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, err
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        coresetup.ClusterCacheCacheOptions(),
		Client:       coresetup.ClusterCacheClientOptions(controllerName, clusterCacheClientQPS, clusterCacheClientBurst),
	}, concurrency(clusterCacheConcurrency))
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	shutdownAtExit(env, clusterCache)
	if err := setupCoreCRDMigrator(ctx, mgr); err != nil {
		return nil, err
	}
	partialSecretCache, err := newPartialSecretCache(mgr)
	if err != nil {
		return nil, err
	}
	setups := coreControllerSetups(ctx, mgr, clusterCache, partialSecretCache)
	for _, s := range setups {
		if err := s.do(); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", s.name, err)
		}
	}
	return mgr, nil
}

// setupCoreCRDMigrator sets up the migration of the core provider's stored
// objects to their CRDs' storage versions.
func setupCoreCRDMigrator(ctx context.Context, mgr manager.Manager) error {
	migrated := map[client.Object]crdmigrator.ByObjectConfig{
		&addonsv1.ClusterResourceSetBinding{}: {UseCache: false},
		&addonsv1.ClusterResourceSet{}:        {UseCache: false, UseStatusForStorageVersionMigration: true},
		&clusterv1.Cluster{}:                  {UseCache: false, UseStatusForStorageVersionMigration: true},
		&clusterv1.MachineDeployment{}:        {UseCache: false, UseStatusForStorageVersionMigration: true},
		&clusterv1.MachineDrainRule{}:         {UseCache: false},
		&clusterv1.MachineHealthCheck{}:       {UseCache: false, UseStatusForStorageVersionMigration: true},
		&clusterv1.Machine{}:                  {UseCache: false, UseStatusForStorageVersionMigration: true},
		&clusterv1.MachineSet{}:               {UseCache: false, UseStatusForStorageVersionMigration: true},
		&ipamv1.IPAddress{}:                   {UseCache: false},
		&ipamv1.IPAddressClaim{}:              {UseCache: false, UseStatusForStorageVersionMigration: true},
	}
	if feature.Gates.Enabled(feature.ClusterTopology) {
		migrated[&clusterv1.ClusterClass{}] = crdmigrator.ByObjectConfig{UseCache: false, UseStatusForStorageVersionMigration: true}
	}
	if feature.Gates.Enabled(feature.MachinePool) {
		migrated[&clusterv1.MachinePool{}] = crdmigrator.ByObjectConfig{UseCache: false, UseStatusForStorageVersionMigration: true}
	}
	if err := (&crdmigrator.CRDMigrator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: migrated}).
		SetupWithManager(ctx, mgr, concurrency(1)); err != nil {
		return fmt.Errorf("setting up the CRD migrator: %w", err)
	}
	return nil
}

// newPartialSecretCache adds to mgr a cache of Secrets' metadata only, for
// the ClusterResourceSet controller, as the core provider's main.go sets up.
func newPartialSecretCache(mgr manager.Manager) (ctrlcache.Cache, error) {
	partialSecretCache, err := ctrlcache.New(mgr.GetConfig(), ctrlcache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		SyncPeriod:       ptr.To(syncPeriod),
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the metadata-only Secret cache: %w", err)
	}
	if err := mgr.Add(partialSecretCache); err != nil {
		return nil, err
	}
	return partialSecretCache, nil
}

// controllerSetup sets up one controller with a manager.
type controllerSetup struct {
	name string
	do   func() error
}

// coreControllerSetups are the core provider's controllers, each behind the
// feature gate that enables it.
func coreControllerSetups(ctx context.Context, mgr manager.Manager, clusterCache clustercache.ClusterCache, partialSecretCache ctrlcache.Cache) []controllerSetup {
	setups := []controllerSetup{}
	if feature.Gates.Enabled(feature.ClusterTopology) {
		setups = append(setups,
			controllerSetup{"ClusterClass", func() error {
				return (&clusterclass.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, concurrency(10))
			}},
			controllerSetup{"ClusterTopology", func() error {
				return (&topologycluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache}).
					SetupWithManager(ctx, mgr, concurrency(50))
			}},
			controllerSetup{"MachineDeploymentTopology", func() error {
				return (&topologymachinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).
					SetupWithManager(ctx, mgr, concurrency(25))
			}},
			controllerSetup{"MachineSetTopology", func() error {
				return (&topologymachineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).
					SetupWithManager(ctx, mgr, concurrency(25))
			}},
		)
	}
	setups = append(setups,
		controllerSetup{"Cluster", func() error {
			return (&cluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
				RemoteConnectionGracePeriod: remoteConnectionGracePeriod}).SetupWithManager(ctx, mgr, concurrency(50))
		}},
		controllerSetup{"Machine", func() error {
			return (&machine.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod}).SetupWithManager(ctx, mgr, concurrency(100))
		}},
		controllerSetup{"MachineSet", func() error {
			return (&machineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
				PreflightChecks: machineSetPreflightChecks()}).SetupWithManager(ctx, mgr, concurrency(50))
		}},
		controllerSetup{"MachineDeployment", func() error {
			return (&machinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).
				SetupWithManager(ctx, mgr, concurrency(50))
		}},
	)
	if feature.Gates.Enabled(feature.MachinePool) {
		setups = append(setups, controllerSetup{"MachinePool", func() error {
			return (&machinepool.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache}).
				SetupWithManager(ctx, mgr, concurrency(50))
		}})
	}
	setups = append(setups,
		controllerSetup{"ClusterResourceSet", func() error {
			return (&clusterresourceset.Reconciler{Client: mgr.GetClient(), ClusterCache: clusterCache}).
				SetupWithManager(ctx, mgr, concurrency(10), partialSecretCache)
		}},
		controllerSetup{"ClusterResourceSetBinding", func() error {
			return (&clusterresourcesetbinding.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, concurrency(10))
		}},
		controllerSetup{"MachineHealthCheck", func() error {
			return (&machinehealthcheck.Reconciler{Client: mgr.GetClient(), ClusterCache: clusterCache}).
				SetupWithManager(ctx, mgr, concurrency(50))
		}},
	)
	return setups
}

// machineSetPreflightChecks is the default of --machineset-preflight-checks.
func machineSetPreflightChecks() sets.Set[clusterv1.MachineSetPreflightCheck] {
	return sets.New(clusterv1.MachineSetPreflightCheckAll)
}

func newKubeadmBootstrapManager(ctx context.Context, cfg *rest.Config, env *controllerEnv) (manager.Manager, error) {
	const controllerName = "cluster-api-kubeadm-bootstrap-manager"
	scheme := bootstrapScheme()
	mgr, err := ctrl.NewManager(providerConfig(cfg, controllerName), managerOptions(env, scheme,
		bootstrapsetup.ManagerCacheOptions(scheme, env.informerName(controllerName), "", syncPeriod), bootstrapsetup.ManagerClientOptions()))
	if err != nil {
		return nil, err
	}
	secretCachingClient, err := bootstrapsetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, err
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        bootstrapsetup.ClusterCacheCacheOptions(),
		Client:       bootstrapsetup.ClusterCacheClientOptions(controllerName, clusterCacheClientQPS, clusterCacheClientBurst),
	}, concurrency(clusterCacheConcurrency))
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	shutdownAtExit(env, clusterCache)
	if err := (&crdmigrator.CRDMigrator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: map[client.Object]crdmigrator.ByObjectConfig{
		&bootstrapv1.KubeadmConfig{}:         {UseCache: false, UseStatusForStorageVersionMigration: true},
		&bootstrapv1.KubeadmConfigTemplate{}: {UseCache: false},
	}}).SetupWithManager(ctx, mgr, concurrency(1)); err != nil {
		return nil, fmt.Errorf("setting up the CRD migrator: %w", err)
	}
	if err := (&kubeadmconfig.Reconciler{
		Client:              mgr.GetClient(),
		SecretCachingClient: secretCachingClient,
		APIReader:           mgr.GetAPIReader(),
		ClusterCache:        clusterCache,
		TokenTTL:            kubeadmconfig.DefaultTokenTTL,
	}).SetupWithManager(ctx, mgr, concurrency(100)); err != nil {
		return nil, fmt.Errorf("setting up the KubeadmConfig controller: %w", err)
	}
	return mgr, nil
}

func newKubeadmControlPlaneManager(ctx context.Context, cfg *rest.Config, env *controllerEnv) (manager.Manager, error) {
	const controllerName = "cluster-api-kubeadm-control-plane-manager"
	scheme := controlPlaneScheme()
	mgr, err := ctrl.NewManager(providerConfig(cfg, controllerName), managerOptions(env, scheme,
		controlplanesetup.ManagerCacheOptions(scheme, env.informerName(controllerName), "", syncPeriod), controlplanesetup.ManagerClientOptions()))
	if err != nil {
		return nil, err
	}
	secretCachingClient, err := controlplanesetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, err
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        controlplanesetup.ClusterCacheCacheOptions(),
		Client:       controlplanesetup.ClusterCacheClientOptions(controllerName, clusterCacheClientQPS, clusterCacheClientBurst),
	}, concurrency(clusterCacheConcurrency))
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	shutdownAtExit(env, clusterCache)
	if err := (&crdmigrator.CRDMigrator{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: map[client.Object]crdmigrator.ByObjectConfig{
		&controlplanev1.KubeadmControlPlane{}:         {UseCache: false, UseStatusForStorageVersionMigration: true},
		&controlplanev1.KubeadmControlPlaneTemplate{}: {UseCache: false},
	}}).SetupWithManager(ctx, mgr, concurrency(1)); err != nil {
		return nil, fmt.Errorf("setting up the CRD migrator: %w", err)
	}
	if err := (&kubeadmcontrolplane.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		SecretCachingClient:         secretCachingClient,
		ClusterCache:                clusterCache,
		EtcdDialTimeout:             10 * time.Second,
		EtcdCallTimeout:             etcd.DefaultCallTimeout,
		EtcdLogger:                  zap.NewNop(),
		RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
	}).SetupWithManager(ctx, mgr, controller.Options{
		MaxConcurrentReconciles: 100,
		ReconciliationTimeout:   3 * time.Minute,
	}); err != nil {
		return nil, fmt.Errorf("setting up the KubeadmControlPlane controller: %w", err)
	}
	return mgr, nil
}

// newLoopManager builds the loop provider's manager: the project's own
// provider, built like the kubeadm providers (cached unstructured reads,
// Secrets uncached), with the BareMetalHost controller when the
// installation has hosts.
func newLoopManager(ctx context.Context, cfg *rest.Config, env *controllerEnv) (manager.Manager, error) {
	const controllerName = "cluster-api-loop-controller-manager"
	scheme := loopprovider.NewScheme()
	mgr, err := ctrl.NewManager(providerConfig(cfg, controllerName), managerOptions(env, scheme,
		ctrlcache.Options{SyncPeriod: ptr.To(syncPeriod), DefaultTransform: ctrlcache.TransformStripManagedFields()},
		bootstrapsetup.ManagerClientOptions()))
	if err != nil {
		return nil, err
	}
	if err := loopprovider.SetupWithManager(ctx, mgr, loopprovider.Options{
		Cloud:             env.cloud,
		ManagementCluster: env.cluster,
		Switches:          env.switches,
		Activity:          env.activity,
		Contract:          env.contract,
	}, concurrency(10)); err != nil {
		return nil, err
	}
	if env.hosts != nil {
		if err := hostprovider.SetupWithManager(ctx, mgr, hostprovider.Options{
			Cloud:             env.cloud,
			ManagementCluster: env.cluster,
			Activity:          env.hosts,
		}, concurrency(10)); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}
