package capiprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/hostprovider"
	"github.com/move-operator/move-operator/test/inmemorycloud"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// ProcessFinalizer is put by the harness on the pod that runs a provider's
// controllers, and removed once they have stopped: a kubelet keeps a
// terminating pod until its containers have exited, while kwok would
// delete it at once.
const ProcessFinalizer = "capiprovider.move-operator.test/controller-process"

// ControllerOptions turn on the providers' real controllers (see
// Options.Controllers).
type ControllerOptions struct {
	// Cloud holds the loop provider's VMs. Required.
	Cloud *cloud.Cloud
	// InMemory is the cloud of CAPD's in-memory backend, shared by every
	// installation that runs CAPD's controllers. Required with
	// Options.InMemory.
	InMemory *inmemorycloud.Cloud
	// LoopSwitches change the loop provider's behaviour while it runs.
	// Default: a new set, all off.
	LoopSwitches *loopprovider.Switches
	// LoopContract is the Cluster API contract the loop provider follows:
	// loopprovider.ContractV1Beta1 beside Cluster API v1.10
	// (Options.InfrastructureOnly). Default: v1beta2, this module's.
	LoopContract loopprovider.Contract
}

// teardownGrace bounds a graceful stop when the installation stops.
const teardownGrace = 2 * time.Second

// Run is one life of a provider's controllers: a manager started for one
// Ready pod of its Deployment, as that pod's process would run.
type Run struct {
	// Pod is the namespace/name of the pod the controllers ran for.
	Pod string
	// Started is when the manager was started.
	Started time.Time
	// StopRequested is when the pod began terminating (SIGTERM), zero while
	// it runs.
	StopRequested time.Time
	// Stopped is when the manager returned, or was killed; zero while it runs.
	Stopped time.Time
	// Killed is set when the pod's grace period ran out before the manager
	// returned: from then on nothing the manager sends reaches the API
	// server (see Write.Refused), as after SIGKILL.
	Killed bool
	// Err is what the manager returned, or why it could not start.
	Err error
}

// liveController runs one provider's controllers while its Deployment has
// a Ready pod: the same gate as its webhooks, but with a process's life
// cycle (SIGTERM, grace period, SIGKILL) instead of a Service's endpoints.
type liveController struct {
	p       *Provider
	newMgr  func(context.Context, *rest.Config, *controllerEnv) (manager.Manager, error)
	env     controllerEnv
	cfg     *rest.Config
	client  client.Client
	lister  corelisters.PodLister
	writes  *writeLog
	logFile *os.File
	kick    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	current *process
	runs    []*Run
	changed chan struct{}
}

// process is a running manager and what stopping it needs.
type process struct {
	pod      types.UID
	podKey   client.ObjectKey
	run      *Run
	cancel   context.CancelFunc
	done     chan struct{}
	killed   atomic.Bool
	stopping bool
	// stopped is closed once stop has released the pod.
	stopped chan struct{}
	exits   []func()
}

// startControllers prepares one live controller per provider; they start
// once the pod watch runs (watchPods kicks them).
func (i *Installation) startControllers(opts *ControllerOptions) error {
	if opts.Cloud == nil {
		return errors.New("live controllers need a cloud (ControllerOptions.Cloud)")
	}
	i.loopSwitches = opts.LoopSwitches
	if i.loopSwitches == nil {
		i.loopSwitches = &loopprovider.Switches{}
	}
	i.loopActivity = &loopprovider.Activity{}
	httpClient, err := rest.HTTPClientFor(i.Cluster.Config)
	if err != nil {
		return fmt.Errorf("creating an HTTP client for %s: %w", i.Cluster, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(i.Cluster.Config, httpClient)
	if err != nil {
		return fmt.Errorf("creating a REST mapper for %s: %w", i.Cluster, err)
	}
	i.writes = &writeLog{mapper: mapper}
	cl, err := client.New(i.Cluster.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("creating a client for %s: %w", i.Cluster, err)
	}
	for _, p := range i.Providers {
		spec := p.spec
		logFile, err := os.OpenFile(filepath.Join(i.Cluster.LogDir, "controllers-"+p.Name+".log"),
			os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening the controller log of provider %s: %w", p.Name, err)
		}
		p.live = &liveController{
			p:      p,
			newMgr: spec.newManager,
			env: controllerEnv{
				provider: p.Name,
				logger:   ctrlzap.New(ctrlzap.WriteTo(logFile), ctrlzap.UseDevMode(false)),
				cloud:    opts.Cloud,
				cluster:  i.Cluster.Name,
				switches: i.loopSwitches,
				contract: opts.LoopContract,
				activity: i.loopActivity,
				hosts:    i.hostActivity,
				inMemory: opts.InMemory,
			},
			cfg:     i.Cluster.Config,
			client:  cl,
			writes:  i.writes,
			logFile: logFile,
			kick:    make(chan struct{}, 1),
			done:    make(chan struct{}),
			changed: make(chan struct{}),
		}
	}
	return nil
}

// LoopSwitches are the loop provider's switches, nil without live controllers.
func (i *Installation) LoopSwitches() *loopprovider.Switches { return i.loopSwitches }

// LoopActivity counts the loop provider's reconciles, nil without live
// controllers.
func (i *Installation) LoopActivity() *loopprovider.Activity { return i.loopActivity }

// HostActivity counts the BareMetalHost controller's reconciles, nil
// without live controllers or without Options.Hosts.
func (i *Installation) HostActivity() *hostprovider.Activity { return i.hostActivity }

// Writes returns every write the controllers of this cluster have sent so
// far, in order, nil without live controllers.
func (i *Installation) Writes() []Write {
	if i.writes == nil {
		return nil
	}
	return i.writes.all()
}

// ControllersRunning reports whether the provider's controllers run now.
func (p *Provider) ControllersRunning() bool {
	if p.live == nil {
		return false
	}
	p.live.mu.Lock()
	defer p.live.mu.Unlock()
	return p.live.current != nil
}

// Runs returns the lives of the provider's controllers so far, oldest first.
func (p *Provider) Runs() []Run {
	if p.live == nil {
		return nil
	}
	p.live.mu.Lock()
	defer p.live.mu.Unlock()
	out := make([]Run, len(p.live.runs))
	for i, r := range p.live.runs {
		out[i] = *r
	}
	return out
}

// WaitControllers waits until the provider's controllers run (true) or
// have stopped, none in flight (false).
func (p *Provider) WaitControllers(ctx context.Context, running bool) error {
	if p.live == nil {
		return fmt.Errorf("provider %s has no live controllers (Options.Controllers)", p.Name)
	}
	for {
		p.live.mu.Lock()
		on, changed := p.live.current != nil, p.live.changed
		p.live.mu.Unlock()
		if on == running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the controllers of provider %s to be running=%t: %w", p.Name, running, ctx.Err())
		case <-changed:
		}
	}
}

// poke asks the live controller to look at the pods again.
func (l *liveController) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *liveController) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// loop reacts to pod changes until ctx ends, then stops the controllers.
func (l *liveController) loop(ctx context.Context) {
	defer close(l.done)
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			cur := l.current
			stopNow := cur != nil && !cur.stopping
			if stopNow {
				cur.stopping = true
			}
			l.mu.Unlock()
			switch {
			case stopNow:
				// The environment is going away: a short grace, then kill.
				l.stop(cur, teardownGrace)
			case cur != nil:
				// A pod's stop is under way: let it finish.
				<-cur.stopped
			}
			_ = l.logFile.Close()
			return
		case <-l.kick:
			l.sync(ctx)
		}
	}
}

func (l *liveController) sync(ctx context.Context) {
	pods, err := l.lister.Pods(l.p.Namespace).List(l.p.podSelector)
	if err != nil {
		return
	}
	l.mu.Lock()
	cur := l.current
	if cur != nil {
		if !cur.stopping {
			var pod *corev1.Pod
			for _, candidate := range pods {
				if candidate.UID == cur.pod {
					pod = candidate
				}
			}
			if pod == nil || pod.DeletionTimestamp != nil {
				cur.stopping = true
				go l.stop(cur, l.graceOf(pod))
			}
		}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	var pod *corev1.Pod
	for _, candidate := range pods {
		if anyReady([]*corev1.Pod{candidate}) {
			pod = candidate
			break
		}
	}
	if pod == nil {
		return
	}
	l.start(ctx, pod)
}

// graceOf is the pod's termination grace period: the kubelet sends SIGKILL
// when it runs out. A pod already gone gets none.
func (l *liveController) graceOf(pod *corev1.Pod) time.Duration {
	if pod == nil {
		return 0
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// start runs the provider's controllers for pod.
func (l *liveController) start(ctx context.Context, pod *corev1.Pod) {
	key := client.ObjectKeyFromObject(pod)
	if err := l.addFinalizer(ctx, pod); err != nil {
		if !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
			l.env.logger.Error(err, "holding the controller pod", "pod", key)
			time.AfterFunc(time.Second, l.poke)
		}
		return // A pod already terminating never runs anything.
	}
	run := &Run{Pod: key.String(), Started: time.Now()}
	runCtx, cancel := context.WithCancel(context.Background())
	proc := &process{pod: pod.UID, podKey: key, run: run, cancel: cancel, done: make(chan struct{}), stopped: make(chan struct{})}
	cfg := rest.CopyConfig(l.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &processTransport{next: rt, provider: l.p.Name, log: l.writes, killed: &proc.killed}
	})
	env := l.env
	env.exits = &proc.exits
	env.grace = l.graceOf(pod)
	env.logger = env.logger.WithValues("pod", key.String())
	mgr, err := l.newMgr(runCtx, cfg, &env)
	if err != nil {
		cancel()
		run.Err = fmt.Errorf("building the controllers of provider %s: %w", l.p.Name, err)
		run.Stopped = time.Now()
		l.env.logger.Error(run.Err, "starting")
		l.mu.Lock()
		l.runs = append(l.runs, run)
		l.mu.Unlock()
		for _, exit := range proc.exits {
			exit()
		}
		l.removeFinalizer(key)
		time.AfterFunc(5*time.Second, l.poke)
		return
	}
	go func() {
		defer close(proc.done)
		if err := mgr.Start(runCtx); err != nil {
			l.mu.Lock()
			run.Err = err
			l.mu.Unlock()
		}
	}()
	l.mu.Lock()
	l.current = proc
	l.runs = append(l.runs, run)
	l.notifyLocked()
	l.mu.Unlock()
	// The pod may have started terminating meanwhile.
	l.poke()
}

// stop stops a running manager as a kubelet stops a container: SIGTERM
// (the manager's graceful shutdown lets in-flight reconciles finish), then,
// if the grace period runs out first, SIGKILL (nothing the manager sends
// leaves the process any more). Only then may the pod go.
func (l *liveController) stop(proc *process, grace time.Duration) {
	l.mu.Lock()
	proc.run.StopRequested = time.Now()
	l.mu.Unlock()
	proc.cancel()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	killed := false
	select {
	case <-proc.done:
	case <-timer.C:
		killed = true
	}
	proc.killed.Store(true)
	for _, exit := range proc.exits {
		exit()
	}
	l.mu.Lock()
	proc.run.Stopped = time.Now()
	proc.run.Killed = killed || (proc.run.Err != nil && strings.Contains(proc.run.Err.Error(), "grace period"))
	l.mu.Unlock()
	l.removeFinalizer(proc.podKey)
	l.mu.Lock()
	l.current = nil
	l.notifyLocked()
	l.mu.Unlock()
	close(proc.stopped)
	l.poke()
}

func (l *liveController) addFinalizer(ctx context.Context, pod *corev1.Pod) error {
	if controllerutil.ContainsFinalizer(pod, ProcessFinalizer) {
		return nil
	}
	obj := pod.DeepCopy()
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(obj, ProcessFinalizer)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return l.client.Patch(ctx, obj, patch)
}

// removeFinalizer lets the pod go; it retries, since a pod left behind
// would block its namespace's deletion.
func (l *liveController) removeFinalizer(key client.ObjectKey) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		pod := &corev1.Pod{}
		err := l.client.Get(ctx, key, pod)
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil {
			if !controllerutil.ContainsFinalizer(pod, ProcessFinalizer) {
				return
			}
			patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(pod, ProcessFinalizer)
			if err = l.client.Patch(ctx, pod, patch); err == nil || apierrors.IsNotFound(err) {
				return
			}
		}
		l.env.logger.Error(err, "releasing the controller pod", "pod", key)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
