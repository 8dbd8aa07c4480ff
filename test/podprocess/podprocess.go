package podprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Command is what runs for one pod.
type Command struct {
	// Path is the binary.
	Path string
	// Args are its arguments, without the program name.
	Args []string
	// Env is its whole environment, as a container's is its own: nothing
	// of the test process's leaks in.
	Env []string
	// Cleanup, if set, runs once the process has exited (to remove a
	// kubeconfig written for this run, say).
	Cleanup func()
}

// Options tune Start.
type Options struct {
	// Config reaches the cluster: the pods are watched and held with it.
	Config *rest.Config
	// Namespace and Selector select the pods of one Deployment (its pod
	// template's labels).
	Namespace string
	Selector  labels.Selector
	// Finalizer holds the pod a process runs for until it has exited.
	// Required, and one of its own per caller, so callers never release
	// each other's pods.
	Finalizer string
	// Command builds the command of a run for a Ready pod.
	Command func(ctx context.Context, pod *corev1.Pod) (Command, error)
	// LogPath receives the output of every run, appended.
	LogPath string
	// Started, if set, is called after a process has started; Stopping,
	// if set, once it is to stop (before SIGTERM) or has exited on its
	// own, before its pod is released. Both run on the runner's goroutine:
	// keep them short.
	Started, Stopping func(Run)
	// StopGrace bounds the SIGTERM-to-SIGKILL wait when Stop is called,
	// whatever the pod's grace period. Default 5s.
	StopGrace time.Duration
}

// Run is one life of the process: started for one Ready pod.
type Run struct {
	// Pod is the namespace/name of the pod it ran for.
	Pod string
	// PodUID is that pod's UID.
	PodUID types.UID
	// PID is the process id.
	PID int
	// Started and Stopped bound the process; Stopped is zero while it runs.
	Started, Stopped time.Time
	// Terminated is when it was sent SIGTERM; zero if it exited on its own.
	Terminated time.Time
	// Killed is set when it outlived the pod's grace period.
	Killed bool
	// Err is how it exited, if not with status 0, or why it could not start.
	Err error
}

// Runner runs the process while a pod is Ready; see the package comment.
type Runner struct {
	opts   Options
	client client.Client
	lister corelisters.PodNamespaceLister
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	proc *proc
	runs []*Run
	// backoffUntil is when a process that exited on its own may start again.
	backoff      time.Duration
	backoffUntil time.Time
	loopErr      error
	changed      chan struct{}
}

type proc struct {
	cmd     *exec.Cmd
	podKey  types.NamespacedName
	run     *Run
	done    chan struct{}
	cleanup func()
}

const (
	firstBackoff   = time.Second
	maxBackoff     = 20 * time.Second
	resetBackoffAt = 10 * time.Second
	// defaultGrace is Kubernetes's default terminationGracePeriodSeconds.
	defaultGrace = 30 * time.Second
)

// Start watches the selected pods and runs the command while one is Ready,
// until Stop.
func Start(ctx context.Context, opts Options) (*Runner, error) {
	if opts.Config == nil || opts.Selector == nil || opts.Command == nil || opts.Finalizer == "" || opts.LogPath == "" {
		return nil, errors.New("podprocess: Config, Selector, Command, Finalizer and LogPath are required")
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	c, err := client.New(opts.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating a client for the pods of %s: %w", opts.Namespace, err)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("creating a client for the pod watch of %s: %w", opts.Namespace, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = opts.Selector.String() }))
	podInformer := factory.Core().V1().Pods()
	r := &Runner{
		opts:    opts,
		client:  c,
		lister:  podInformer.Lister().Pods(opts.Namespace),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	informer := podInformer.Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.poke() },
		UpdateFunc: func(any, any) { r.poke() },
		DeleteFunc: func(any) { r.poke() },
	}); err != nil {
		return nil, fmt.Errorf("watching the pods of %s: %w", opts.Namespace, err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go informer.Run(loopCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		cancel()
		return nil, fmt.Errorf("waiting for the pod watch of %s: %w", opts.Namespace, ctx.Err())
	}
	go r.loop(loopCtx)
	return r, nil
}

func (r *Runner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// loop is the kubelet: it runs on a goroutine locked to its own OS thread
// for the runner's life, since the kernel sends the parent-death signal
// when the thread that forked a child ends.
func (r *Runner) loop(ctx context.Context) {
	runtime.LockOSThread()
	// Never unlocked: when the loop returns Go ends the thread, and a child
	// still alive (none should be) dies with it.
	defer close(r.done)
	for {
		err := r.sync(ctx)
		r.mu.Lock()
		if ctx.Err() == nil {
			r.loopErr = err
		}
		proc := r.proc
		wait := time.Second
		if proc == nil && !r.backoffUntil.IsZero() {
			if d := time.Until(r.backoffUntil); d > 0 && d < wait {
				wait = d
			}
		}
		r.mu.Unlock()
		var exited <-chan struct{}
		if proc != nil {
			exited = proc.done
		}
		select {
		case <-ctx.Done():
			if proc != nil {
				r.stop(proc, r.opts.StopGrace)
			}
			return
		case <-r.kick:
		case <-exited:
		case <-time.After(wait):
		}
	}
}

// sync starts the process for a Ready pod, stops it when its pod goes or
// terminates, and starts it again when it exited on its own.
func (r *Runner) sync(ctx context.Context) error {
	pods, err := r.lister.List(r.opts.Selector)
	if err != nil {
		return fmt.Errorf("listing the pods of %s: %w", r.opts.Namespace, err)
	}
	r.mu.Lock()
	proc := r.proc
	r.mu.Unlock()
	if proc != nil {
		var pod *corev1.Pod
		for _, p := range pods {
			if p.UID == proc.run.PodUID {
				pod = p
			}
		}
		select {
		case <-proc.done:
			r.stop(proc, 0)
			return nil
		default:
		}
		if pod == nil || pod.DeletionTimestamp != nil {
			r.stop(proc, podGrace(pod))
		}
		return nil
	}
	r.mu.Lock()
	waiting := time.Now().Before(r.backoffUntil)
	r.mu.Unlock()
	if waiting {
		return nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil && podReady(pod) {
			return r.start(ctx, pod.DeepCopy())
		}
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

// podGrace is the pod's terminationGracePeriodSeconds: what a kubelet
// allows a container a ReplicaSet's scale-down terminates. Not the pod's
// deletionGracePeriodSeconds: kwok deletes terminating pods again with 0,
// which a kubelet never sees.
func podGrace(pod *corev1.Pod) time.Duration {
	if pod == nil {
		return 0 // gone already: nothing is left to wait for
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}

func (r *Runner) start(ctx context.Context, pod *corev1.Pod) error {
	if err := r.hold(ctx, pod); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone or changed: look again
		}
		return fmt.Errorf("holding pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	run := &Run{Pod: pod.Namespace + "/" + pod.Name, PodUID: pod.UID, Started: time.Now()}
	command, err := r.opts.Command(ctx, pod)
	if err != nil {
		run.Err = fmt.Errorf("preparing the command: %w", err)
		r.failedStart(run, pod)
		return run.Err
	}
	logFile, err := os.OpenFile(r.opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		if command.Cleanup != nil {
			command.Cleanup()
		}
		run.Err = err
		r.failedStart(run, pod)
		return err
	}
	fmt.Fprintf(logFile, "=== podprocess: starting %s for pod %s (uid %s) at %s\n", command.Path, run.Pod, pod.UID, run.Started.Format(time.RFC3339Nano))
	cmd := exec.Command(command.Path, command.Args...)
	cmd.Env = command.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		if command.Cleanup != nil {
			command.Cleanup()
		}
		run.Err = fmt.Errorf("starting %s: %w", command.Path, err)
		r.failedStart(run, pod)
		return run.Err
	}
	run.PID = cmd.Process.Pid
	p := &proc{cmd: cmd, podKey: client.ObjectKeyFromObject(pod), run: run, done: make(chan struct{}), cleanup: command.Cleanup}
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "=== podprocess: %s exited at %s: %v\n", command.Path, time.Now().Format(time.RFC3339Nano), exitDescription(err))
		_ = logFile.Close()
		r.mu.Lock()
		run.Err = err
		r.mu.Unlock()
		close(p.done)
	}()
	r.mu.Lock()
	r.proc = p
	r.runs = append(r.runs, run)
	r.notifyLocked()
	r.mu.Unlock()
	if r.opts.Started != nil {
		r.opts.Started(*run)
	}
	return nil
}

func exitDescription(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// failedStart records a run that never started and lets its pod go.
func (r *Runner) failedStart(run *Run, pod *corev1.Pod) {
	run.Stopped = time.Now()
	r.mu.Lock()
	r.runs = append(r.runs, run)
	r.backOffLocked(0)
	r.notifyLocked()
	r.mu.Unlock()
	r.release(client.ObjectKeyFromObject(pod))
}

// backOffLocked sets when the next process may start after one that lasted
// ran for: a kubelet's CrashLoopBackOff, shortened.
func (r *Runner) backOffLocked(ran time.Duration) {
	if ran >= resetBackoffAt || r.backoff == 0 {
		r.backoff = firstBackoff
	} else {
		r.backoff = min(2*r.backoff, maxBackoff)
	}
	r.backoffUntil = time.Now().Add(r.backoff)
}

func (r *Runner) hold(ctx context.Context, pod *corev1.Pod) error {
	if controllerutil.ContainsFinalizer(pod, r.opts.Finalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(pod, r.opts.Finalizer)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.client.Patch(ctx, pod, patch)
}

// stop sends SIGTERM to the process's group (unless it has exited), waits
// up to grace, then SIGKILL, and lets the pod go.
func (r *Runner) stop(p *proc, grace time.Duration) {
	exited := false
	select {
	case <-p.done:
		exited = true
	default:
	}
	if r.opts.Stopping != nil {
		r.mu.Lock()
		run := *p.run
		r.mu.Unlock()
		r.opts.Stopping(run)
	}
	killed := false
	if !exited {
		r.mu.Lock()
		p.run.Terminated = time.Now()
		r.mu.Unlock()
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		timer := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-timer.C:
			killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		timer.Stop()
	}
	if p.cleanup != nil {
		p.cleanup()
	}
	r.mu.Lock()
	p.run.Stopped = time.Now()
	p.run.Killed = killed
	r.proc = nil
	if exited {
		r.backOffLocked(p.run.Stopped.Sub(p.run.Started))
	} else {
		r.backoffUntil = time.Time{}
	}
	r.mu.Unlock()
	r.release(p.podKey)
	r.mu.Lock()
	r.notifyLocked()
	r.mu.Unlock()
}

// release removes the finalizer from the pod, retrying: a pod left behind
// would block its namespace's deletion.
func (r *Runner) release(key types.NamespacedName) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		pod := &corev1.Pod{}
		err := r.client.Get(ctx, key, pod)
		if apierrors.IsNotFound(err) || (err == nil && !controllerutil.ContainsFinalizer(pod, r.opts.Finalizer)) {
			return
		}
		if err == nil {
			patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(pod, r.opts.Finalizer)
			if err := r.client.Patch(ctx, pod, patch); err == nil || apierrors.IsNotFound(err) {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *Runner) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Running reports whether the process runs now.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}

// WaitRunning waits until the process runs (true), or has exited and its
// pod is released (false).
func (r *Runner) WaitRunning(ctx context.Context, running bool) error {
	for {
		r.mu.Lock()
		on, changed, loopErr := r.proc != nil, r.changed, r.loopErr
		r.mu.Unlock()
		if on == running {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("waiting for the process of %s/%s to be running=%t (its log: %s): %w",
				r.opts.Namespace, r.opts.Selector, running, r.opts.LogPath, ctx.Err()), loopErr)
		case <-changed:
		case <-r.done:
			return fmt.Errorf("waiting for the process of %s/%s to be running=%t: the runner was stopped", r.opts.Namespace, r.opts.Selector, running)
		}
	}
}

// Runs returns its lives so far, oldest first.
func (r *Runner) Runs() []Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Run, len(r.runs))
	for i, run := range r.runs {
		out[i] = *run
	}
	return out
}

// Err returns the last error of the loop, if any: a pod it could not hold
// or a command it could not start.
func (r *Runner) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loopErr
}

// Stop stops the process (SIGTERM, SIGKILL after Options.StopGrace), lets
// its pod go and stops watching. It is safe to call more than once.
func (r *Runner) Stop() {
	r.cancel()
	<-r.done
}
