package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// operatorMover moves a fleet's namespace with a MoveOperation handled by
// the operator running as a real process against the source, started
// afresh for each move so that its peak RSS is this move's.
type operatorMover struct {
	b       *bench
	f       benchFleet
	cmd     *exec.Cmd
	exited  chan struct{}
	metrics string
	// pprof serves the operator's profiles (http://host:port).
	pprof string
	heap  *heapSampler
	mo    *movev1alpha1.MoveOperation
	// timeout bounds the move (-move-timeout, by the fleet's size).
	timeout time.Duration
}

func (m *operatorMover) prepare(ctx context.Context) ([]component, error) {
	metricsAddr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	probeAddr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(m.b.workDir, "operator-"+m.f.namespace+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	o := m.b.opts
	args := []string{"--leader-elect=false",
		"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address=" + probeAddr,
		"--pprof-bind-address=" + pprofAddr,
		"--kube-api-qps=" + strconv.FormatFloat(o.qps, 'f', -1, 64),
		"--kube-api-burst=" + strconv.Itoa(o.burst),
		"--move-concurrency=" + strconv.Itoa(o.concurrency)}
	cmd := exec.Command(m.b.manager, append(args, o.operatorFlags...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.b.clusters.env.Source.KubeconfigPath, "GOMEMLIMIT="+m.b.goMemLimit)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The operator dies with the bench, however the bench ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	m.cmd, m.exited, m.metrics = cmd, make(chan struct{}), "http://"+metricsAddr+"/metrics"
	m.pprof = "http://" + pprofAddr
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(m.exited)
	}()
	if err := m.waitReady(ctx, "http://"+probeAddr+"/readyz"); err != nil {
		m.stop()
		return nil, fmt.Errorf("%w (its log: %s)", err, logPath)
	}
	return []component{{name: "operator", pid: cmd.Process.Pid}}, nil
}

// waitReady waits until the operator's readiness probe answers: its
// manager has started, so the move's time is not its start-up's.
func (m *operatorMover) waitReady(ctx context.Context, probe string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, http.NoBody)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-m.exited:
			return fmt.Errorf("the operator exited before it was ready: %s", m.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("the operator was not ready within a minute: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

// move creates the MoveOperation and watches it until it ends. The times of
// the phases are those at which the watch showed each phase first: the
// phaseTransitions in the status have one-second precision only.
func (m *operatorMover) move(ctx context.Context, r *result) error {
	m.timeout = m.b.opts.moveTimeoutFor(len(m.f.fleet.Clusters))
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	c := m.b.clusters.source
	m.mo = &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: "move-" + m.f.namespace},
		Spec: movev1alpha1.MoveOperationSpec{
			Target:     movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: targetSecret}},
			Namespaces: []string{m.f.namespace},
		},
	}
	w, err := c.Watch(ctx, &movev1alpha1.MoveOperationList{}, client.InNamespace(moveNamespace),
		client.MatchingFields{"metadata.name": m.mo.Name})
	if err != nil {
		return fmt.Errorf("watching MoveOperation %s: %w", m.mo.Name, err)
	}
	defer w.Stop()
	began := time.Now()
	if err := c.Create(ctx, m.mo); err != nil {
		return fmt.Errorf("creating MoveOperation %s/%s: %w", m.mo.Namespace, m.mo.Name, err)
	}
	if dir := m.b.opts.heapProfileDir; dir != "" {
		m.heap = startHeapSampler(ctx, m.pprof, filepath.Join(dir, fmt.Sprintf("n%d-r%d-operator.heap", r.n, r.rep)), 2*time.Second)
	}
	seen := phaseClock{began: began}
	last, err := m.follow(ctx, w, &seen, r)
	if err := errors.Join(err, m.stopHeapSampler(r)); err != nil {
		return err
	}
	if last.Status.Phase != movev1alpha1.PhaseDone {
		return fmt.Errorf("MoveOperation %s ended in phase %s: %s: %s (operator log in %s)", m.mo.Name,
			last.Status.Phase, last.Status.FailureReason, last.Status.FailureMessage, m.b.workDir)
	}
	seen.settle(last.Status.PhaseTransitions)
	r.whole = seen.since(movev1alpha1.PhaseDone)
	r.copy = seen.between(movev1alpha1.PhaseCopying, movev1alpha1.PhaseDeleting)
	r.delete = seen.between(movev1alpha1.PhaseDeleting, movev1alpha1.PhaseRestoringTarget)
	r.copyDelete = r.copy + r.delete
	r.phases = seen.spans()
	return nil
}

// follow reads the watch until the MoveOperation is Done or Failed. A watch
// the API server closes is opened again; phases missed meanwhile are filled
// in from the status afterwards.
func (m *operatorMover) follow(ctx context.Context, w watch.Interface, seen *phaseClock, r *result) (*movev1alpha1.MoveOperation, error) {
	c := m.b.clusters.source
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("MoveOperation %s did not end within %s (-move-timeout); last phase seen %s", m.mo.Name, m.timeout, seen.last())
		case <-m.exited:
			return nil, fmt.Errorf("the operator exited (%s) in phase %s", m.cmd.ProcessState, seen.last())
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				w.Stop()
				var err error
				if w, err = c.Watch(ctx, &movev1alpha1.MoveOperationList{}, client.InNamespace(moveNamespace),
					client.MatchingFields{"metadata.name": m.mo.Name}); err != nil {
					return nil, fmt.Errorf("watching MoveOperation %s again: %w", m.mo.Name, err)
				}
				defer w.Stop()
				continue
			}
			mo, ok := ev.Object.(*movev1alpha1.MoveOperation)
			if !ok {
				continue
			}
			seen.observe(string(mo.Status.Phase), time.Now())
			if status, err := json.Marshal(mo.Status); err == nil && len(status) > r.statusBytes {
				r.statusBytes = len(status)
			}
			if p := mo.Status.Phase; p == movev1alpha1.PhaseDone || p == movev1alpha1.PhaseFailed {
				return mo, nil
			}
		}
	}
}

// stopHeapSampler ends the heap sampling and keeps its peak in r.
func (m *operatorMover) stopHeapSampler(r *result) error {
	if m.heap == nil {
		return nil
	}
	summary, err := m.heap.stop()
	r.peakHeap = m.heap.peak
	m.heap = nil
	if summary != "" {
		say("  %s", summary)
	}
	return err
}

func (m *operatorMover) finish(ctx context.Context, r *result) error {
	var errs []error
	if m.cmd == nil {
		return nil
	}
	if rss, err := peakRSS(m.cmd.Process.Pid); err == nil {
		r.peakRSS = rss
	} else {
		errs = append(errs, fmt.Errorf("reading the operator's peak RSS: %w", err))
	}
	if counts, err := m.clientRequests(ctx); err == nil {
		r.clientRequests = counts
	} else {
		errs = append(errs, err)
	}
	if m.mo != nil {
		errs = append(errs, m.deleteMoveOperation(ctx))
	}
	m.stop()
	return errors.Join(errs...)
}

// clientRequests reads the operator's own request counters
// (controller-runtime's rest_client_requests_total), by cluster and verb.
func (m *operatorMover) clientRequests(ctx context.Context) (map[string]requestCounts, error) {
	families, err := scrape(ctx, http.DefaultClient, m.metrics)
	if err != nil {
		return nil, fmt.Errorf("reading the operator's metrics: %w", err)
	}
	out := map[string]requestCounts{}
	for _, mgmt := range []struct{ name, host string }{
		{"source", m.b.clusters.env.Source.Config.Host},
		{"target", m.b.clusters.env.Target.Config.Host},
	} {
		u, err := url.Parse(mgmt.host)
		if err != nil {
			return nil, err
		}
		out[mgmt.name] = sumBy(families, "rest_client_requests_total", "method", map[string]string{"host": u.Host})
	}
	return out, nil
}

// deleteMoveOperation deletes the finished MoveOperation while the operator
// still runs to remove its finalizer, so the next operator starts clean.
func (m *operatorMover) deleteMoveOperation(ctx context.Context) error {
	c := m.b.clusters.source
	if err := c.Delete(ctx, m.mo); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting MoveOperation %s: %w", m.mo.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(m.mo), &movev1alpha1.MoveOperation{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("MoveOperation %s was not gone a minute after its deletion: %w", m.mo.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends the operator: SIGTERM, and SIGKILL after 10 s.
func (m *operatorMover) stop() {
	if m.cmd == nil {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
	}
	m.cmd = nil
}

// freeAddress returns a loopback address with a port free right now.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// phaseClock records when the watch first showed each phase of a move.
type phaseClock struct {
	began time.Time
	seen  map[string]time.Time
	order []string
	// timeline is the phases in the order the status lists them, with
	// their times; set by settle.
	timeline []phaseAt
}

type phaseAt struct {
	phase string
	at    time.Time
}

func (p *phaseClock) observe(phase string, t time.Time) {
	if phase == "" {
		return
	}
	if p.seen == nil {
		p.seen = map[string]time.Time{}
	}
	if _, ok := p.seen[phase]; !ok {
		p.seen[phase] = t
		p.order = append(p.order, phase)
	}
}

// settle builds the timeline from the status's phaseTransitions, which
// lists every phase in order, and the watch's times, which are precise to
// the millisecond where the status has seconds. A phase the watch missed
// (it lasted less than the gap between two status writes) gets its status
// time, kept between its neighbours' watch times.
func (p *phaseClock) settle(transitions []movev1alpha1.PhaseTransition) {
	p.timeline = nil
	prev := p.began
	for i, tr := range transitions {
		phase := string(tr.Phase)
		if t, ok := p.seen[phase]; ok {
			p.timeline = append(p.timeline, phaseAt{phase, t})
			prev = t
			continue
		}
		t := tr.Time.Time
		if t.Before(prev) {
			t = prev
		}
		for _, later := range transitions[i+1:] {
			if next, ok := p.seen[string(later.Phase)]; ok {
				if t.After(next) {
					t = next
				}
				break
			}
		}
		p.timeline = append(p.timeline, phaseAt{phase, t})
		prev = t
	}
}

func (p *phaseClock) last() string {
	if len(p.order) == 0 {
		return "(none yet)"
	}
	return p.order[len(p.order)-1]
}

func (p *phaseClock) at(phase movev1alpha1.MovePhase) time.Time {
	for _, e := range p.timeline {
		if e.phase == string(phase) {
			return e.at
		}
	}
	return p.seen[string(phase)]
}

func (p *phaseClock) since(phase movev1alpha1.MovePhase) time.Duration {
	return p.at(phase).Sub(p.began)
}

func (p *phaseClock) between(from, to movev1alpha1.MovePhase) time.Duration {
	a, b := p.at(from), p.at(to)
	if a.IsZero() || b.IsZero() {
		return 0
	}
	return b.Sub(a)
}

// spans are the phases but the last with their durations; the time from
// creating the MoveOperation to its first phase counts as "(start)".
func (p *phaseClock) spans() []phaseSpan {
	var out []phaseSpan
	prev, prevName := p.began, "(start)"
	for _, e := range p.timeline {
		out = append(out, phaseSpan{phase: prevName, duration: e.at.Sub(prev)})
		prev, prevName = e.at, e.phase
	}
	return out
}
