// Command manager runs move-operator: the controller that moves Cluster API
// management state to another cluster as MoveOperation objects ask.
package main

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	archivecmd "github.com/move-operator/move-operator/internal/archive/command"
	"github.com/move-operator/move-operator/internal/claim"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/identity"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/remote"
	targetaccesscmd "github.com/move-operator/move-operator/internal/targetaccess/command"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(movev1alpha1.AddToScheme(scheme))
}

// options are the manager's command-line settings.
type options struct {
	metricsAddr             string
	secureMetrics           bool
	enableHTTP2             bool
	probeAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	concurrency             int
	qps                     float64
	burst                   int
	moveConcurrency         int
	operatorDeployment      string
	claimNamespace          string
	pprofAddr               string
	creatorPolicy           string
	archiveDirectory        string
	spoolDirectory          string
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticated and authorized through the API server. Set false to serve plain HTTP.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 for the metrics server; off by default because of the HTTP/2 Stream Cancellation and Rapid Reset CVEs.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the liveness and readiness probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true,
		"Elect a leader so that only one replica moves at a time; keep on when running more than one replica.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election lease; defaults to the namespace the manager runs in.")
	// A move waits for a new leader with every provider stopped: the lease
	// duration is how long at most, after the leader dies without releasing.
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long a leader that stopped renewing (it died) keeps the lease before another replica takes over the move.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader retries renewing before it gives up leading and stops.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often replicas try to acquire or renew the lease.")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", 2,
		"How many MoveOperations are reconciled at once (only one moves per source cluster; the others wait).")
	// A move is short and runs while every provider controller is stopped:
	// the sooner it ends, the sooner they run again. --move-concurrency is
	// what bounds the load on each API server (with its own priority and
	// fairness); the rate limit is a ceiling, as high as clusterctl's own.
	fs.Float64Var(&o.qps, "kube-api-qps", 500, "Steady requests per second to each cluster's API server.")
	fs.IntVar(&o.burst, "kube-api-burst", 1000, "Burst of requests above kube-api-qps to each cluster's API server.")
	fs.IntVar(&o.moveConcurrency, "move-concurrency", move.DefaultConcurrency,
		"Requests in flight to one cluster while copying, pausing or deleting objects.")
	fs.StringVar(&o.claimNamespace, "claim-namespace", "",
		"Namespace of the Lease that lets one MoveOperation at a time move this cluster; defaults to the leader election namespace, else the namespace the manager runs in, else \"default\".")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address to serve Go's profiles on (/debug/pprof/), to see where a large move's memory goes; empty disables it. Unauthenticated: bind it to loopback.")
	fs.StringVar(&o.creatorPolicy, "creator-policy", creator.PolicyName,
		"ValidatingAdmissionPolicy that admits a MoveOperation only if its creator may do what it moves; a move starts only when it is installed as shipped, older than the MoveOperation, and bound with Deny (docs/access.md).")
	fs.StringVar(&o.archiveDirectory, "archive-directory", "",
		"Directory that backups to spec.target.archive.directory write to: a volume (a PersistentVolumeClaim) mounted in the operator's Pod. Empty refuses such backups.")
	fs.StringVar(&o.spoolDirectory, "spool-directory", "",
		"Directory an archive is written to before it is pushed to a registry; defaults to the system's temporary directory (an emptyDir at /tmp in the shipped Deployment).")
	fs.StringVar(&o.operatorDeployment, "operator-deployment", "",
		"namespace/name of the operator's own Deployment, never scaled down even when it matches the controllers selector.")
}

// targetAccessManifest is what `manager target-access` applies to a target
// cluster: built into the binary, so that the command and the operator it
// gives access to always agree on the rules.
//
//go:embed dist/target-access.yaml
var targetAccessManifest []byte

func main() {
	// A subcommand comes first, with flags of its own; without one the
	// binary is the manager, as the Deployment runs it.
	if len(os.Args) > 1 && os.Args[1] == targetaccesscmd.Name {
		os.Exit(runTargetAccess(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == archivecmd.Name {
		os.Exit(runArchive(os.Args[2:]))
	}
	var opts options
	opts.bind(flag.CommandLine)
	// No stack traces below panic: an error of a stuck move is one line with
	// its reason, logged once (see the reconciler), not a trace per retry.
	zapOpts := zap.Options{Development: false, StacktraceLevel: zapcore.PanicLevel}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := startManager(opts); err != nil {
		setupLog.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}

// runTargetAccess runs `manager target-access` and returns its exit code:
// 2 for a command line it cannot parse, 1 for any other error.
func runTargetAccess(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := targetaccesscmd.Run(ctx, args, targetAccessManifest, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, targetaccesscmd.ErrUsage):
		return 2 // Run has said what is wrong, with the usage
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", targetaccesscmd.Name, err)
	return 1
}

// runArchive runs the archive subcommand; it returns the exit code.
func runArchive(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := archivecmd.Run(ctx, args, os.Stdout, os.Stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, archivecmd.ErrUsage):
		return 2 // Run has said what is wrong, with the usage
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", archivecmd.Name, err)
	return 1
}

// startManager starts the manager with the MoveOperation reconciler, and
// blocks until it stops.
func startManager(opts options) error {
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS = float32(opts.qps)
	restConfig.Burst = opts.burst
	mgr, err := newManager(opts, restConfig)
	if err != nil {
		return err
	}
	// The source is read and written without a cache: a move reads each
	// object once, and informers for every Cluster API kind would hold the
	// whole management state in memory.
	sourceConfig := rest.CopyConfig(restConfig)
	sourceConfig.WarningHandlerWithContext = remote.OnceEachWarning()
	source, err := client.New(sourceConfig, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("building the source client: %w", err)
	}
	self, err := parseNamespacedName(opts.operatorDeployment)
	if err != nil {
		return fmt.Errorf("--operator-deployment: %w", err)
	}
	moves := &controllers.MoveOperationReconciler{
		Client:    mgr.GetClient(),
		Source:    source,
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("move-operator"),
		Targets: &remote.Clients{
			Reader: mgr.GetAPIReader(), Scheme: scheme,
			QPS: float32(opts.qps), Burst: opts.burst,
		},
		Claim: types.NamespacedName{Namespace: claimNamespace(opts), Name: claim.DefaultName},
		Self:  self,
		Move:  move.Options{Concurrency: opts.moveConcurrency},

		CreatorPolicy: opts.creatorPolicy,
		Archives:      controllers.Archives{Directory: opts.archiveDirectory, SpoolDirectory: opts.spoolDirectory},
	}
	if err := moves.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: opts.concurrency}); err != nil {
		return err
	}
	if err := (&controllers.BackupScheduleReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("move-operator"),
		Self:     source,
		// A schedule removes a pruned backup's archive from the store
		// that backup wrote to, reached as the backup reached it.
		ArchiveStore: moves.ArchiveStoreOf,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	setupLog.Info("starting manager", "identity", usernameIn(source), "operatorDeployment", self.String(), "leaderElection", opts.leaderElect, "concurrency", opts.concurrency)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newManager builds the controller-runtime manager: metrics served as the
// flags say, and leader election that lets a new leader start only once
// the old one has stopped writing.
func newManager(opts options, restConfig *rest.Config) (ctrl.Manager, error) {
	var tlsOpts []func(*tls.Config)
	if !opts.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   opts.metricsAddr,
		SecureServing: opts.secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if opts.secureMetrics {
		// Only callers the API server authenticates and authorizes for
		// "get /metrics" may read the metrics.
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  opts.probeAddr,
		PprofBindAddress:        opts.pprofAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "move-operator.move.cluster.x-k8s.io",
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		// A new leader must not start while the old one may still write: the
		// move's crash safety relies on one writer at a time.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.leaseDuration,
		RenewDeadline:                 &opts.renewDeadline,
		RetryPeriod:                   &opts.retryPeriod,
	})
}

// usernameIn is who the API server takes the manager for: the identity
// the RBAC of dist/install.yaml must be bound to, and the one its webhook
// bypass will name, said once, up front ("unknown" when it cannot be
// learnt now: a move learns it again).
func usernameIn(source client.Client) string {
	who, err := identity.WhoAmI(context.Background(), source)
	if err != nil {
		setupLog.Info("could not learn the manager's identity in the source; a move learns it again", "error", err.Error())
		return "unknown"
	}
	return who.Username
}

// inClusterNamespaceFile holds the namespace of a pod's ServiceAccount.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// claimNamespace is where the claim Lease lives: beside the leader election
// Lease, which the installer's Role already lets the manager write.
func claimNamespace(opts options) string {
	for _, ns := range []string{opts.claimNamespace, opts.leaderElectionNamespace} {
		if ns != "" {
			return ns
		}
	}
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return "default"
}

func parseNamespacedName(s string) (types.NamespacedName, error) {
	if s == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("%q is not namespace/name", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
