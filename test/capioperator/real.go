package capioperator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/localcluster"
)

// processFinalizer is put on the pod the real cluster-api-operator runs
// for, and removed once its process has exited: a kubelet keeps a
// terminating pod until its containers have exited, while kwok would
// delete it at once, and a move that waits for the pods to be gone must
// find the process gone too.
const processFinalizer = "capioperator.move-operator.test/process"

// Run is one life of the real cluster-api-operator: a process started for
// one Ready pod of its Deployment.
type Run struct {
	// Pod is the namespace/name of the pod it ran for.
	Pod string
	// Started and Stopped bound the process; Stopped is zero while it runs.
	Started, Stopped time.Time
	// Killed is set when it outlived the pod's grace period.
	Killed bool
	// Err is how it exited, if not cleanly.
	Err error
}

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

	c         client.Client
	podLabels map[string]string
	binary    string
	args      []string
	kubecfg   string
	grace     time.Duration

	mu         sync.Mutex
	syncPeriod time.Duration
	proc       *realProcess
	runs       []*Run
	// loopErr is the last error of the loop, if any.
	loopErr error

	cancel context.CancelFunc
	done   chan struct{}
}

type realProcess struct {
	cmd  *exec.Cmd
	pod  types.UID
	key  types.NamespacedName
	run  *Run
	done chan struct{}
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
	loopCtx, cancel := context.WithCancel(context.Background())
	r := &Real{
		Key: key, LogPath: filepath.Join(cluster.LogDir, "capi-operator-"+key.Namespace+".log"),
		c: c, podLabels: podLabels, binary: bin, args: args, kubecfg: kubeconfig, grace: opts.Grace, syncPeriod: opts.SyncPeriod,
		cancel: cancel, done: make(chan struct{}),
	}
	go r.loop(loopCtx)
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

func (r *Real) loop(ctx context.Context) {
	defer close(r.done)
	for {
		err := r.sync(ctx)
		r.mu.Lock()
		if err != nil && ctx.Err() == nil {
			r.loopErr = err
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			r.mu.Lock()
			proc := r.proc
			r.mu.Unlock()
			if proc != nil {
				r.stop(proc, 2*time.Second)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sync does what a kubelet would: start the process for a Ready pod, stop
// it when its pod terminates, and start it again when it exited on its own.
func (r *Real) sync(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods, client.InNamespace(r.Key.Namespace), client.MatchingLabels(r.podLabels)); err != nil {
		return fmt.Errorf("listing cluster-api-operator's pods: %w", err)
	}
	r.mu.Lock()
	proc := r.proc
	r.mu.Unlock()
	if proc != nil {
		var pod *corev1.Pod
		for i := range pods.Items {
			if pods.Items[i].UID == proc.pod {
				pod = &pods.Items[i]
			}
		}
		exited := false
		select {
		case <-proc.done:
			exited = true
		default:
		}
		if pod == nil || pod.DeletionTimestamp != nil || exited {
			r.stop(proc, r.grace)
		}
		return nil
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || !podReady(pod) {
			continue
		}
		return r.start(ctx, pod)
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (r *Real) start(ctx context.Context, pod *corev1.Pod) error {
	if !controllerutil.ContainsFinalizer(pod, processFinalizer) {
		patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(pod, processFinalizer)
		if err := r.c.Patch(ctx, pod, patch); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil // gone or changed: look again
			}
			return fmt.Errorf("holding cluster-api-operator's pod: %w", err)
		}
	}
	logFile, err := os.OpenFile(r.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	r.mu.Lock()
	args := r.args
	if r.syncPeriod > 0 {
		args = append(args[:len(args):len(args)], "--sync-period="+r.syncPeriod.String())
	}
	r.mu.Unlock()
	cmd := exec.Command(r.binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	run := &Run{Pod: client.ObjectKeyFromObject(pod).String(), Started: time.Now()}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting cluster-api-operator: %w", err)
	}
	proc := &realProcess{cmd: cmd, pod: pod.UID, key: client.ObjectKeyFromObject(pod), run: run, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		r.mu.Lock()
		run.Err = err
		r.mu.Unlock()
		close(proc.done)
	}()
	r.mu.Lock()
	r.proc = proc
	r.runs = append(r.runs, run)
	r.mu.Unlock()
	return nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILL, and lets the pod go.
func (r *Real) stop(proc *realProcess, grace time.Duration) {
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	killed := false
	select {
	case <-proc.done:
	case <-time.After(grace):
		killed = true
		_ = proc.cmd.Process.Kill()
		<-proc.done
	}
	r.mu.Lock()
	proc.run.Stopped = time.Now()
	proc.run.Killed = killed
	r.proc = nil
	r.mu.Unlock()
	r.release(proc.key)
}

// release removes the finalizer from the pod, retrying: a pod left behind
// would block its namespace's deletion.
func (r *Real) release(key types.NamespacedName) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		pod := &corev1.Pod{}
		err := r.c.Get(ctx, key, pod)
		if apierrors.IsNotFound(err) || (err == nil && !controllerutil.ContainsFinalizer(pod, processFinalizer)) {
			return
		}
		if err == nil {
			patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(pod, processFinalizer)
			if err := r.c.Patch(ctx, pod, patch); err == nil || apierrors.IsNotFound(err) {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
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
func (r *Real) Running(context.Context) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil, nil
}

// WaitRunning waits until its process runs (true) or has exited and its pod
// is released (false).
func (r *Real) WaitRunning(ctx context.Context, running bool) error {
	for {
		on, _ := r.Running(ctx)
		if on == running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for cluster-api-operator %s to be running=%t (its log: %s): %w", r.Key, running, r.LogPath, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Runs returns its lives so far, oldest first.
func (r *Real) Runs() []Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Run, len(r.runs))
	for i, run := range r.runs {
		out[i] = *run
	}
	return out
}

// Err returns the last error of the loop that plays its kubelet, if any.
func (r *Real) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loopErr
}

// Stop stops its process (a short grace), deletes its Deployment and
// removes its kubeconfig.
func (r *Real) Stop(ctx context.Context) error {
	r.cancel()
	<-r.done
	err := r.c.Delete(ctx, deploymentRef(r.Key))
	return errors.Join(client.IgnoreNotFound(err), os.Remove(r.kubecfg))
}
