package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/hack/image"
	"github.com/move-operator/move-operator/test/installed"
)

// operatorMover moves a fleet's namespace with a MoveOperation handled by
// the operator running as a real process against the source, as installed
// (package installed), started afresh for each move so that its peak RSS is
// this move's.
type operatorMover struct {
	b *bench
	f benchFleet
	// status is the MoveOperation's spec.objectStatusPolicy; empty leaves it to its
	// default (Rebuild), as the default run has always measured it.
	status  movev1alpha1.ObjectStatusPolicy
	run     *installed.Running
	metrics string
	// pprof serves the operator's profiles (http://host:port).
	pprof string
	heap  *heapSampler
	mo    *movev1alpha1.MoveOperation
	// timeout bounds the move (-move-timeout, by the fleet's size).
	timeout time.Duration
}

// prepareOperator reads the installer, takes the manager binary out of the
// image and settles its GOMEMLIMIT: what every operator move of the run
// shares.
func (b *bench) prepareOperator() error {
	var err error
	if b.install, err = installed.Read(b.root); err != nil {
		return err
	}
	p := image.HostPlatform()
	say("taking the manager binary out of the %s/%s image (%s)", p.OS, p.Architecture, imageOrigin())
	if b.manager, err = installed.ManagerBinary(); err != nil {
		return err
	}
	digest, err := fileDigest(b.manager)
	if err != nil {
		return err
	}
	ns, sa := b.install.ServiceAccount()
	b.machine.operator = fmt.Sprintf("the manager binary (sha256 %s) of the %s/%s image, %s; run with the args and env of the Deployment in %s "+
		"as ServiceAccount %s/%s with that file's RBAC, its target credential made from %s",
		digest[:12], p.OS, p.Architecture, imageOrigin(), installed.InstallPath, ns, sa, installed.TargetAccessPath)
	say("operator: %s", b.manager)
	if dir := b.opts.heapProfileDir; dir != "" {
		// The heap profiles are in the text format, read with the binary.
		if err := copyFile(b.manager, filepath.Join(dir, "manager")); err != nil {
			return err
		}
	}
	if b.goMemLimit, err = b.opts.operatorGoMemLimit(b.install); err != nil {
		return err
	}
	b.machine.settings += "; operator GOMEMLIMIT " + b.goMemLimit.describe
	gogc, err := b.install.EnvValue("GOGC")
	if err != nil {
		return err
	}
	if gogc == "" {
		gogc = "100 (Go's default: the Deployment sets none)"
	} else {
		gogc += " (the Deployment's)"
	}
	b.machine.settings += ", GOGC " + gogc
	if b.opts.podStartLatency > 0 {
		b.machine.settings += fmt.Sprintf("; pods Ready %s after they are scheduled (-pod-start-latency)", b.opts.podStartLatency)
	}
	if b.opts.conversionWhileStopped {
		b.machine.settings += "; conversion webhooks served while the providers are at zero (-conversion-while-stopped)"
	}
	say("operator GOMEMLIMIT: %s, GOGC %s", b.goMemLimit.describe, gogc)
	return nil
}

// imageOrigin says which image installed.ManagerBinary takes the binary
// out of, so that the report does not claim a build it did not make: with
// MOVE_OPERATOR_IMAGE_DIR set, the tarball make image left there (built now
// only when absent); without it, one hack/image builds from the working
// tree into bin/image.
func imageOrigin() string {
	if dir := os.Getenv(image.ImageDirEnv); dir != "" {
		return fmt.Sprintf("the tarball in %s=%s as make image wrote it (built from the working tree only if it was absent)", image.ImageDirEnv, dir)
	}
	return "built by hack/image from the working tree into bin/image, as make image builds it"
}

// fileDigest is the hex SHA-256 of a file: it names the binary that ran.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

// prepare starts the operator as installed, with the bench's own settings
// after the Deployment's args, and returns once it leads.
func (m *operatorMover) prepare(ctx context.Context) ([]component, error) {
	p, err := m.b.startOperator(ctx, m.b.clusters.identity, nil, "operator-"+m.f.namespace+".log")
	if err != nil {
		return nil, err
	}
	m.run, m.metrics, m.pprof = p.run, p.metrics, p.pprof
	return []component{{name: "operator", pid: m.run.Pid}}, nil
}

// operatorProcess is the operator running as installed.
type operatorProcess struct {
	run *installed.Running
	// metrics is its metrics endpoint (http://host:port/metrics), pprof
	// serves its profiles (http://host:port).
	metrics, pprof string
}

// startOperator starts the operator as installed, with id as its identity
// in the cluster it runs in, the bench's own settings after the
// Deployment's args, then more (what the caller measures with), its log in
// the work directory under logName; it returns once the operator leads.
func (b *bench) startOperator(ctx context.Context, id *installed.Identity, more []string, logName string) (*operatorProcess, error) {
	metricsAddr, err := installed.FreeAddress()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := installed.FreeAddress()
	if err != nil {
		return nil, err
	}
	o := b.opts
	args := []string{
		// The Deployment serves metrics over HTTPS to callers the API server
		// authorizes; the bench scrapes the operator's client counters with
		// plain HTTP on loopback.
		"--metrics-secure=false",
		// -heap-profile samples the heap there.
		"--pprof-bind-address=" + pprofAddr,
		// The operator and the baseline run with the same client limits,
		// whatever -qps, -burst and -concurrency say, so that the floor is
		// a fair one.
		"--kube-api-qps=" + strconv.FormatFloat(o.qps, 'f', -1, 64),
		"--kube-api-burst=" + strconv.Itoa(o.burst),
		"--move-concurrency=" + strconv.Itoa(o.concurrency),
	}
	args = append(args, more...)
	// -operator-flags come last so that they win: what someone measuring
	// asked for.
	args = append(args, o.operatorFlags...)
	logPath := filepath.Join(b.workDir, logName)
	run, err := b.install.Start(ctx, installed.Process{
		Binary:         b.manager,
		Identity:       id,
		MetricsAddress: metricsAddr,
		Args:           args,
		Env:            b.goMemLimit.env,
	}, logPath)
	if err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	p := &operatorProcess{run: run, metrics: "http://" + metricsAddr + "/metrics", pprof: "http://" + pprofAddr}
	if err := waitLeading(ctx, p); err != nil {
		if stopErr := run.Stop(); stopErr != nil {
			say("  stopping the operator: %v", stopErr)
		}
		return nil, fmt.Errorf("%w (its log: %s)", err, logPath)
	}
	return p, nil
}

// waitLeading waits until the operator holds its leader lease. The
// Deployment's args elect a leader, and the manager is ready before it
// leads: waiting here keeps the election out of the move's time (the
// previous operator released the lease when it stopped, so this takes one
// attempt).
func waitLeading(ctx context.Context, p *operatorProcess) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		if families, err := scrape(ctx, http.DefaultClient, p.metrics); err == nil && leads(families) {
			return nil
		}
		select {
		case <-p.run.Exited():
			return fmt.Errorf("the operator exited before it led: %w", p.run.Err())
		case <-ctx.Done():
			return fmt.Errorf("the operator did not hold its leader lease within a minute: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

// leads says whether controller-runtime's leader election gauge is set.
func leads(families map[string]*dto.MetricFamily) bool {
	for _, m := range families["leader_election_master_status"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
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
			Target:             movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: targetSecret}},
			Namespaces:         []string{m.f.namespace},
			ObjectStatusPolicy: m.status,
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
		m.heap = startHeapSampler(ctx, m.pprof, filepath.Join(dir, fmt.Sprintf("n%d-r%d-%s.heap", r.n, r.rep, fileTag(r.tool))), 2*time.Second)
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
		case <-m.run.Exited():
			return nil, fmt.Errorf("the operator exited (%w) in phase %s (its log: %s)", m.run.Err(), seen.last(), m.run.LogPath)
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
	if m.run == nil {
		return nil
	}
	if rss, err := peakRSS(m.run.Pid); err == nil {
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

// stop stops the operator as the kubelet stops its pod: SIGTERM, then
// SIGKILL after the Deployment's grace period.
func (m *operatorMover) stop() {
	if m.run == nil {
		return
	}
	if err := m.run.Stop(); err != nil {
		say("  stopping the operator: %v", err)
	}
	m.run = nil
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
