package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/grpclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/capirelease"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/inmemorycloud"
	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/workload"
)

// Options tune Start.
type Options struct {
	// CAPI installs the Cluster API management setup in both clusters.
	CAPI bool
	// Controllers (with CAPI) runs the providers' real controllers in both
	// clusters while their Deployments have Ready pods, with one simulated
	// cloud shared by both (Env.Cloud). Off by default: most tests need
	// only the webhooks, and start faster without controllers.
	Controllers bool
	// Hosts (with CAPI) installs Metal3's BareMetalHost kind in both
	// clusters, with the operator's RBAC for it, and (with Controllers)
	// runs its controller with the loop provider's (see package
	// hostprovider). Off by default.
	Hosts bool
	// InMemory (with CAPI) installs CAPD, Cluster API's development
	// infrastructure provider, in both clusters beside the loop provider
	// and (with Controllers) runs its in-memory backend against one
	// in-memory cloud shared by both (Env.InMemory, package
	// inmemorycloud). Off by default.
	InMemory bool
	// Logf receives progress lines. Default: standard error.
	Logf func(format string, args ...any)
	// SelfHosted (with Controllers) makes the target management cluster
	// also a workload cluster, served at Env.SelfHosted: a fleet created
	// with fleet.Live{Workload: env.SelfHosted} in the source is the
	// Cluster whose control plane, kubeconfig and Nodes are the target's,
	// which moving it there makes self-hosted (a pivot). Off by default.
	SelfHosted bool
	// Names are the local clusters' names, source's then target's (they
	// name kubeconfig contexts and directories). Default "source" and
	// "target".
	Names [2]string
	// PodStartLatency is how long a scheduled pod takes to become Running
	// and Ready (localcluster.Options.PodStartLatency). Default 0.
	PodStartLatency time.Duration
	// Logger is given to controller-runtime's log.SetLogger by Main; the
	// webhooks served in-process log through it. Default: discarded.
	Logger *logr.Logger
	// Kubernetes is the release the clusters' kube-apiserver,
	// kube-controller-manager and kube-scheduler are of, one that
	// hack/kube-binaries.sh pins besides the default (such as "1.33", see
	// localcluster.BinaryDirOf). Default: the release of the Kubernetes
	// libraries the project builds against (localcluster.BinaryDir).
	Kubernetes string
	// OlderClusterAPIInSource (with CAPI) installs in the source, instead
	// of this module's Cluster API, the older release of package
	// capirelease (v1.10.9, the v1beta1 contract) as `clusterctl init`
	// leaves it, its managers run from their released binaries
	// (Management.Release), with the loop provider beside it following
	// the v1beta1 contract: the source of a move across contracts. The
	// binaries must have been built (capirelease.Binaries). The target
	// is as without it. Off by default.
	OlderClusterAPIInSource bool
}

// Env is a pair of running local management clusters.
type Env struct {
	Source *Management
	Target *Management
	// StartupDuration is how long starting both clusters (and installing
	// Cluster API, when asked) took.
	StartupDuration time.Duration
	// Cloud is the simulated cloud account both clusters' loop provider
	// uses, nil unless Options.Controllers.
	Cloud *cloud.Cloud
	// InMemory is the cloud of CAPD's in-memory backend, shared by both
	// clusters, nil unless Options.InMemory and Options.Controllers.
	InMemory *inmemorycloud.Cloud
	// Workload is the API server every workload cluster of the fleets
	// points at, nil unless Options.Controllers.
	Workload *workload.Server
	// SelfHosted serves the target management cluster as a workload
	// cluster, nil unless Options.SelfHosted.
	SelfHosted *workload.Server

	cloudLog *os.File
	// opts are the options the pair was started with, for StartManagement.
	opts Options
}

// Management is one local management cluster with a client for it.
type Management struct {
	*localcluster.Cluster
	// CAPI is the installed management setup, nil unless Options.CAPI.
	CAPI *capiprovider.Installation
	// Client reads and writes every Cluster API kind (capiprovider.NewScheme).
	Client client.Client
	// Release is the older Cluster API installed in the source
	// (Options.OlderClusterAPIInSource), nil otherwise; CAPI then holds
	// the loop provider alone.
	Release *capirelease.Installation
}

// Start starts the source and target clusters in parallel.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Logf == nil {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	env := &Env{opts: opts}
	if opts.InMemory && opts.Controllers {
		var err error
		if env.InMemory, err = inmemorycloud.New(); err != nil {
			return nil, err
		}
	}
	var selfHosted *workload.Certificates
	if opts.SelfHosted {
		var err error
		if selfHosted, err = workload.NewCertificates(); err != nil {
			return nil, fmt.Errorf("generating the self-hosted cluster's certificates: %w", err)
		}
	}
	workloadDone := make(chan error, 1)
	if opts.Controllers {
		env.Cloud = cloud.New()
		go func() {
			w, err := workload.Start(ctx, workload.Options{Logf: opts.Logf})
			env.Workload = w
			workloadDone <- err
		}()
	} else {
		workloadDone <- nil
	}
	type result struct {
		m   *Management
		err error
	}
	names := opts.Names
	if names == [2]string{} {
		names = [2]string{"source", "target"}
	}
	results := [2]chan result{make(chan result, 1), make(chan result, 1)}
	for i, ch := range results {
		go func() {
			var ca *workload.Certificates
			if i == 1 {
				ca = selfHosted
			}
			m, err := startManagement(ctx, names[i], opts, env, ca, i == 0 && opts.OlderClusterAPIInSource)
			ch <- result{m, err}
		}()
	}
	src, tgt := <-results[0], <-results[1]
	env.Source, env.Target = src.m, tgt.m
	if err := errors.Join(src.err, tgt.err, <-workloadDone); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if selfHosted != nil {
		var err error
		if env.SelfHosted, err = workload.OnCluster(env.Target.Cluster, selfHosted); err != nil {
			return nil, errors.Join(err, env.Stop())
		}
	}
	if env.InMemory != nil {
		if err := env.logInMemoryCloud(); err != nil {
			return nil, errors.Join(err, env.Stop())
		}
	}
	env.StartupDuration = time.Since(began)
	opts.Logf("%s ready in %s (source %s, target %s)", opts.describe(), env.StartupDuration.Round(time.Millisecond),
		env.Source.StartupDuration.Round(time.Millisecond), env.Target.StartupDuration.Round(time.Millisecond))
	return env, nil
}

// validate refuses options that need another they lack.
func (o Options) validate() error {
	switch {
	case o.Controllers && !o.CAPI:
		return errors.New("testenv: Controllers needs CAPI")
	case o.Hosts && !o.CAPI:
		return errors.New("testenv: Hosts needs CAPI")
	case o.SelfHosted && !o.Controllers:
		return errors.New("testenv: SelfHosted needs Controllers")
	case o.InMemory && !o.CAPI:
		return errors.New("testenv: InMemory needs CAPI")
	case o.OlderClusterAPIInSource && !o.CAPI:
		return errors.New("testenv: OlderClusterAPIInSource needs CAPI")
	case o.OlderClusterAPIInSource && (o.InMemory || o.SelfHosted):
		return errors.New("testenv: OlderClusterAPIInSource runs neither CAPD nor a self-hosted target")
	}
	return nil
}

// describe says what Start starts, for its progress line.
func (o Options) describe() string {
	what := "two local management clusters"
	if o.CAPI {
		what += " with Cluster API installed"
	}
	if o.Controllers {
		what += " and its controllers running"
	}
	if o.Hosts {
		what += ", with BareMetalHosts"
	}
	if o.InMemory {
		what += ", with CAPD's in-memory provider"
	}
	if o.SelfHosted {
		what += ", the target a workload cluster too"
	}
	if o.Kubernetes != "" {
		what += ", on Kubernetes " + o.Kubernetes
	}
	if o.OlderClusterAPIInSource {
		what += ", the source on Cluster API " + capirelease.Version
	}
	return what
}

// startManagement starts one management cluster; with certs, its API
// server serves and authenticates with their CA (Options.SelfHosted);
// older, it runs the older Cluster API (Options.OlderClusterAPIInSource).
func startManagement(ctx context.Context, name string, opts Options, env *Env, certs *workload.Certificates, older bool) (*Management, error) {
	clusterOpts := localcluster.Options{Logf: opts.Logf, PodStartLatency: opts.PodStartLatency}
	if certs != nil {
		clusterOpts.CACert, clusterOpts.CAKey = certs.CA.Cert, certs.CA.Key
	}
	if opts.Kubernetes != "" {
		var err error
		if clusterOpts.BinaryDir, err = localcluster.BinaryDirOf(ctx, opts.Kubernetes); err != nil {
			return nil, err
		}
	}
	c, err := localcluster.Start(ctx, name, clusterOpts)
	if err != nil {
		return nil, err
	}
	m := &Management{Cluster: c}
	if m.Client, err = client.New(c.Config, client.Options{Scheme: capiprovider.NewScheme()}); err != nil {
		return m, fmt.Errorf("creating a client for %s: %w", c, err)
	}
	if opts.CAPI {
		capiOpts := capiprovider.Options{Logf: opts.Logf, Hosts: opts.Hosts, InMemory: opts.InMemory}
		if opts.Controllers {
			capiOpts.Controllers = &capiprovider.ControllerOptions{Cloud: env.Cloud, InMemory: env.InMemory}
		}
		if older {
			if m.Release, err = capirelease.Install(ctx, c, capirelease.Options{Logf: opts.Logf}); err != nil {
				return m, err
			}
			capiOpts.InfrastructureOnly = true
			if capiOpts.Controllers != nil {
				capiOpts.Controllers.LoopContract = loopprovider.ContractV1Beta1
			}
		}
		if m.CAPI, err = capiprovider.Install(ctx, c, capiOpts); err != nil {
			return m, err
		}
	}
	return m, nil
}

// StartManagement starts one more management cluster beside the pair,
// set up as Start set them up (Cluster API, and its controllers on the
// same simulated clouds and workload API server), but never self-hosted:
// for a test that needs a cluster of its own, such as one it loses
// (Lose). The test stops it; Env.Stop does not.
func (e *Env) StartManagement(ctx context.Context, name string) (*Management, error) {
	opts := e.opts
	opts.SelfHosted = false
	m, err := startManagement(ctx, name, opts, e, nil, false)
	if err != nil {
		return nil, errors.Join(err, m.Lose())
	}
	return m, nil
}

// Lose stops a management cluster as one that is lost: its controllers
// stop, its processes end, its data is removed (its logs stay).
func (m *Management) Lose() error {
	if m == nil || m.Cluster == nil {
		return nil
	}
	var errs []error
	if m.CAPI != nil {
		errs = append(errs, m.CAPI.Stop())
	}
	return errors.Join(append(errs, m.Stop())...)
}

// Stop stops both clusters (logs stay; see RemoveLogs).
func (e *Env) Stop() error {
	var errs []error
	if e.Cloud != nil {
		// Held cloud calls would keep controllers from stopping.
		e.Cloud.Close()
	}
	for _, m := range []*Management{e.Source, e.Target} {
		if m == nil {
			continue
		}
		if m.CAPI != nil {
			errs = append(errs, m.CAPI.Stop())
		}
		errs = append(errs, m.Stop())
	}
	if e.Workload != nil {
		errs = append(errs, e.Workload.Stop())
	}
	if e.InMemory != nil {
		// After the controllers: they call it until they stop.
		errs = append(errs, e.InMemory.Stop())
	}
	if e.cloudLog != nil {
		log.SetOutput(os.Stderr)
		errs = append(errs, e.cloudLog.Close())
	}
	return errors.Join(errs...)
}

// logInMemoryCloud sends the standard logger's output to the source's log
// directory: the in-memory cloud's workload API servers are net/http
// servers without a logger of their own, so net/http writes every TLS
// handshake a controller drops, and go-restful every superfluous
// WriteHeader, through it, dozens a second while controllers run; gRPC's
// warnings and errors go there too.
func (e *Env) logInMemoryCloud() error {
	f, err := os.OpenFile(filepath.Join(e.Source.LogDir, "inmemory-cloud.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the in-memory cloud's log: %w", err)
	}
	e.cloudLog = f
	log.SetOutput(f)
	// KubeadmControlPlane's etcd client logs every dropped connection to a
	// workload cluster's etcd member through gRPC's global logger.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, f, f))
	return nil
}

// RemoveLogs removes both clusters' directories.
func (e *Env) RemoveLogs() error {
	var errs []error
	for _, m := range []*Management{e.Source, e.Target} {
		if m != nil {
			errs = append(errs, m.RemoveLogs())
		}
	}
	if e.Workload != nil {
		errs = append(errs, e.Workload.RemoveLogs())
	}
	return errors.Join(errs...)
}

// LogDirs names where the process logs of both clusters are.
func (e *Env) LogDirs() string {
	var dirs []string
	for _, m := range []*Management{e.Source, e.Target} {
		if m != nil {
			dirs = append(dirs, m.Name+": "+m.LogDir)
		}
	}
	if e.Workload != nil {
		dirs = append(dirs, "workload: "+e.Workload.LogDir)
	}
	return strings.Join(dirs, ", ")
}

// Main is the body of a TestMain: it starts the pair, stores it in *env, runs
// the tests, stops the pair, and keeps the logs only if something failed.
func Main(m *testing.M, opts Options, env **Env) {
	os.Exit(run(m, opts, env))
}

func run(m *testing.M, opts Options, env **Env) int {
	// Without a logger controller-runtime prints a stack trace the first time
	// an in-process webhook logs.
	logger := logr.Discard()
	if opts.Logger != nil {
		logger = *opts.Logger
	}
	ctrllog.SetLogger(logger)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	e, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local management clusters: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local management clusters: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "process logs of the local management clusters kept in %s\n", e.LogDirs())
		return code
	}
	if err := e.RemoveLogs(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
	}
	return code
}

// NewNamespace creates a namespace with a random suffix in the given cluster
// and deletes it when the test ends.
func NewNamespace(t testing.TB, m *Management, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s in %s: %v", ns.Name, m.Cluster, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s in %s: %v", ns.Name, m.Cluster, err)
		}
	})
	return ns.Name
}
