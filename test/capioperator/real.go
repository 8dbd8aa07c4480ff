package capioperator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/podprocess"
)

// processFinalizer is put on the pod the real cluster-api-operator runs
// for, and removed once its process has exited: a kubelet keeps a
// terminating pod until its containers have exited, while kwok would
// delete it at once, and a move that waits for the pods to be gone must
// find the process gone too.
const processFinalizer = "capioperator.move-operator.test/process"

// Run is one life of the real cluster-api-operator: a process started for
// one Ready pod of its Deployment (podprocess.Run: its pod, when it
// started and stopped, whether it was killed, how it exited).
type Run = podprocess.Run

// RealOptions tune StartReal.
type RealOptions struct {
	// SyncPeriod is its --sync-period: how often it reconciles every
	// provider object again (re-applying the provider's manifests). Zero
	// keeps its default, 10 minutes.
	SyncPeriod time.Duration
	// Grace is its pods' termination grace period. Default 10s.
	Grace time.Duration
}

// Real runs the released cluster-api-operator manager (Binary) against one
// local cluster while its Deployment has a Ready pod, as that pod's
// container would: started when a pod becomes Ready, sent SIGTERM when the
// pod starts terminating, SIGKILL when its grace period runs out, and only
// then is the pod let go. A move's scale to zero stops it exactly as it
// stops the real thing.
type Real struct {
	// Key is its Deployment, labelled InstallerLabels as its release
	// manifests and Helm chart label it.
	Key types.NamespacedName
	// LogPath is the file its output goes to, one file for all its runs.
	LogPath string

	c       client.Client
	kubecfg string
	// runner plays its kubelet: the process for each Ready pod.
	runner *podprocess.Runner

	mu         sync.Mutex
	syncPeriod time.Duration
}

// StartReal creates cluster-api-operator's Deployment key in a cluster (one
// replica, on the cluster's kwok node) and runs the binary while it has a
// Ready pod, until Stop. The process runs as a user of its own in
// system:masters (the release manifests give it cluster-admin-like rights
// too), with its probes, metrics and profiler off; its webhook server, which
// it cannot do without, listens on a free port with a certificate of its
// own, and no webhook configuration points at it.
func StartReal(ctx context.Context, cluster *localcluster.Cluster, c client.Client, key types.NamespacedName, opts RealOptions) (*Real, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	_, kubeconfig, err := cluster.AddUser("capi-operator-" + key.Namespace)
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp(cluster.Dir, "capi-operator-certs-")
	if err != nil {
		return nil, err
	}
	if err := capiprovider.WriteServingFiles(certDir, "capi-operator-webhook-service", key.Namespace); err != nil {
		return nil, fmt.Errorf("writing cluster-api-operator's webhook certificate: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--health-addr=0", "--diagnostics-address=0", "--insecure-diagnostics", "--profiler-address=",
		"--webhook-port=" + strconv.Itoa(port), "--webhook-cert-dir=" + certDir,
		"--v=2",
	}
	podLabels := map[string]string{"app": "real-" + key.Name}
	grace := int64(opts.Grace / time.Second)
	if err := createManagerDeployment(ctx, c, key, InstallerLabels, podLabels, &grace); err != nil {
		return nil, fmt.Errorf("creating cluster-api-operator's Deployment %s: %w", key, err)
	}
	r := &Real{
		Key: key, LogPath: filepath.Join(cluster.LogDir, "capi-operator-"+key.Namespace+".log"),
		c: c, kubecfg: kubeconfig, syncPeriod: opts.SyncPeriod,
	}
	r.runner, err = podprocess.Start(ctx, podprocess.Options{
		Config: cluster.Config, Namespace: key.Namespace, Selector: labels.SelectorFromSet(podLabels),
		Finalizer: processFinalizer, LogPath: r.LogPath,
		// Its pods' grace is opts.Grace (the Deployment's); Stop is quicker.
		StopGrace: 2 * time.Second,
		Command: func(context.Context, *corev1.Pod) (podprocess.Command, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			run := args
			if r.syncPeriod > 0 {
				run = append(args[:len(args):len(args)], "--sync-period="+r.syncPeriod.String())
			}
			// The test process's environment, as it always ran with.
			return podprocess.Command{Path: bin, Args: run, Env: os.Environ()}, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("running cluster-api-operator for the pods of %s: %w", key, err)
	}
	return r, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SetSyncPeriod changes its --sync-period from its next start on, as an
// edit of its Deployment's args would (zero: its default).
func (r *Real) SetSyncPeriod(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncPeriod = d
}

// Running reports whether its process runs now. The context is unused: it
// has the signature of StandIn.Running, so that tests watch both alike.
func (r *Real) Running(context.Context) (bool, error) { return r.runner.Running(), nil }

// WaitRunning waits until its process runs (true) or has exited and its pod
// is released (false).
func (r *Real) WaitRunning(ctx context.Context, running bool) error {
	if err := r.runner.WaitRunning(ctx, running); err != nil {
		return fmt.Errorf("cluster-api-operator %s: %w", r.Key, err)
	}
	return nil
}

// Runs returns its lives so far, oldest first.
func (r *Real) Runs() []Run { return r.runner.Runs() }

// Err returns the last error of the loop that plays its kubelet, if any.
func (r *Real) Err() error { return r.runner.Err() }

// Stop stops its process (a short grace), deletes its Deployment and
// removes its kubeconfig.
func (r *Real) Stop(ctx context.Context) error {
	r.runner.Stop()
	err := r.c.Delete(ctx, deploymentRef(r.Key))
	return errors.Join(client.IgnoreNotFound(err), os.Remove(r.kubecfg))
}
