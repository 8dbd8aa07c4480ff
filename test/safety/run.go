package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/devfleet"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/hostprovider"
	"github.com/move-operator/move-operator/test/inmemorycloud"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// The movers. Every scenario runs with clusterctl and the operator as it
// is installed (spec.objectStatusPolicy Rebuild, the default, as clusterctl moves);
// the operator carrying status (spec.objectStatusPolicy Carry) runs only in the
// scenarios that ask for it (scenario.movers): clusterctl has no
// counterpart, and elsewhere it would repeat the operator's row.
const (
	moverClusterctl    = "clusterctl"
	moverOperator      = "operator"
	moverOperatorCarry = "operator, Carry"
)

// defaultMovers are the movers of a scenario that names none.
var defaultMovers = []string{moverClusterctl, moverOperator}

// isOperator reports whether m is the operator, with either status policy.
func isOperator(m string) bool { return m == moverOperator || m == moverOperatorCarry }

// moverCode is the short name of a mover in its fleet's namespace.
func moverCode(m string) string {
	switch m {
	case moverOperator:
		return "op"
	case moverOperatorCarry:
		return "oc"
	default:
		return "cc"
	}
}

// Bounds of one run.
const (
	// settleBefore bounds how long a fresh fleet may take to settle in the
	// source; quietBefore is how long no controller may have written to it.
	settleBefore = 4 * time.Minute
	quietBefore  = 10 * time.Second
	// moveBound bounds a move on a loaded machine.
	moveBound = 6 * time.Minute
	// settleAfter bounds how long the moved fleet may take to be Available
	// and reconciled in the target.
	settleAfter = 4 * time.Minute
)

// fleetOptions is every run's fleet: one classic workload cluster with a
// control plane Machine, a MachineDeployment of one worker, a MachinePool
// of one instance and a MachineHealthCheck, in one namespace (plus the
// empty class namespace fleet.Create always makes), and, when the
// scenario asks for hosts, a BareMetalHost for the worker. Classic only:
// clusterctl's create of a ClusterClass-based Cluster was refused by the
// Cluster admission webhook here, again and again, while the ClusterClass
// copy stayed paused and unreconciled in the target (see docs/safety.md),
// and a fleet clusterctl cannot move compares nothing.
func fleetOptions(prefix string, l *lab, hosts bool) fleet.Options {
	return fleet.Options{
		Clusters:   1,
		Workers:    ptr.To(1),
		Namespaces: []string{prefix},
		Name:       prefix,
		Live:       &fleet.Live{Cloud: l.env.Cloud, Workload: l.env.Workload, ManagementCluster: l.env.Source.Name},
		Hosts:      hosts,
	}
}

// createFleet creates the scenario's fleet in the source: fleetOptions', or
// with capd one classic CAPD in-memory cluster of the same shape (one
// control-plane Machine, one worker; CAPD has no machine pools) in a
// namespace of its own, left for the source's controllers to provision.
func (l *lab) createFleet(ctx context.Context, s scenario, prefix string) (*fleet.Fleet, error) {
	if !s.capd {
		return fleet.Create(ctx, l.env.Source.Client, fleetOptions(prefix, l, s.hosts))
	}
	if err := l.env.Source.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", prefix, err)
	}
	return devfleet.Create(ctx, l.env.Source.Client, devfleet.Options{Namespace: prefix, Prefix: prefix, Clusters: 1})
}

// result is what one move of one scenario did.
type result struct {
	scenario, mover string
	moveErr         error
	duration        time.Duration
	vmCreated       int
	vmDeleted       int
	vmPoweredOff    int
	machinesCreated int
	machinesDeleted int
	// hostsProvisioned counts the Provision events of the fleet's
	// BareMetalHosts: each wipes a host's disk under its running node.
	hostsProvisioned int
	copyDiffs        []copyDiff
	// lateWrites are the controllers' successful writes to the fleet after
	// the mover read it and before the move ended.
	lateWrites []capiprovider.Write
	settled    bool
	settleNote string
	// sequence is what happened, in order, for the report.
	sequence []string
	// drill: the run is the disaster drill, where copies are not compared
	// and late writes not counted, and where two more things are checked:
	// the machines' objects the target's controllers made again
	// (madeAgain), and the workload Nodes replaced (another UID after the
	// restore than before the backup).
	drill         bool
	madeAgain     []string
	nodesReplaced int
}

func (r result) summary() string {
	if r.moveErr != nil {
		return "move failed: " + r.moveErr.Error()
	}
	return fmt.Sprintf("moved in %s; VMs created %d, deleted %d, powered off %d; Machines created %d, deleted %d; hosts provisioned %d; copies differing %d; late writes %d; settled %t %s",
		r.duration.Round(time.Millisecond), r.vmCreated, r.vmDeleted, r.vmPoweredOff, r.machinesCreated, r.machinesDeleted,
		r.hostsProvisioned, len(r.copyDiffs), len(r.lateWrites), r.settled, r.settleNote)
}

// disturbed reports whether any figure is non-zero or the fleet did not settle.
func (r result) disturbed() bool {
	return r.moveErr != nil || r.vmCreated+r.vmDeleted+r.vmPoweredOff+r.machinesCreated+r.machinesDeleted+r.hostsProvisioned+len(r.copyDiffs)+len(r.lateWrites)+len(r.madeAgain)+r.nodesReplaced > 0 || !r.settled
}

// eventLog collects the scenario's own steps with their times.
type eventLog struct {
	mu     sync.Mutex
	events []timedEvent
}

type timedEvent struct {
	at   time.Time
	what string
}

func (e *eventLog) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, timedEvent{time.Now(), fmt.Sprintf(format, args...)})
}

func (e *eventLog) all() []timedEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]timedEvent(nil), e.events...)
}

// runOne creates a fleet, lets it settle, arms the scenario, moves the
// fleet with the mover, and measures.
func (l *lab) runOne(ctx context.Context, s scenario, m string) result {
	if s.drill {
		return l.runDrill(ctx, s, m)
	}
	r := result{scenario: s.id, mover: m}
	prefix := "s" + s.id + moverCode(m) + "-" + rand.String(4)
	f, err := l.createFleet(ctx, s, prefix)
	if err != nil {
		r.moveErr = fmt.Errorf("creating the fleet: %w", err)
		return r
	}
	defer l.removeFleet(f)
	keep := takeover.InFleet(f)
	if err := l.waitSettledInSource(ctx, f, keep); err != nil {
		r.moveErr = err
		return r
	}
	log := &eventLog{}
	arm, err := s.arm(ctx, l, f, log)
	if err != nil {
		r.moveErr = fmt.Errorf("arming the scenario: %w", err)
		return r
	}
	rec, err := startRecorder(ctx, l.env.Source.Config, l.env.Target.Config, l.kinds, keep)
	if err != nil {
		r.moveErr = err
		return r
	}
	mark := takeover.MarkNow(l.env)

	tl := mover.ClusterctlTimeline()
	if isOperator(m) {
		tl = mover.OperatorTimeline()
	}
	read := func() time.Time { return tl.Reached(readStep(m)) }
	var during sync.WaitGroup
	if arm.during != nil {
		during.Add(1)
		go func() { defer during.Done(); arm.during(ctx, read) }()
	}
	r.moveErr = l.move(ctx, tl, m, prefix, f)
	during.Wait()
	if arm.after != nil {
		arm.after(ctx)
	}
	rec.stop()
	r.duration = tl.Ended.Sub(tl.Began)
	log.add("%s: the move ended (%s)", m, tl)
	if r.moveErr != nil {
		r.sequence = l.sequence(log, tl, mark, keep)
		return r
	}
	copied := tl.Reached(copiedStep(m))
	if copied.IsZero() {
		copied = tl.Ended
	}
	r.copyDiffs = rec.differences(copied)
	for _, d := range r.copyDiffs {
		say("  copy differs: %s\n%s", d.Key, d.Diff)
	}
	settleCtx, stopSettling := context.WithCancel(ctx)
	var settling sync.WaitGroup
	if arm.settling != nil {
		settling.Add(1)
		go func() { defer settling.Done(); arm.settling(settleCtx) }()
	}
	r.settled, r.settleNote = l.settleInTarget(ctx, f)
	stopSettling()
	settling.Wait()
	log.add("settle: %t %s", r.settled, r.settleNote)
	r.sequence = l.sequence(log, tl, mark, keep)
	l.count(&r, mark, keep, read(), copied, arm)
	for _, w := range r.lateWrites {
		r.sequence = append(r.sequence, lateWritePrefix+w.String())
	}
	sort.Strings(r.sequence)
	return r
}

// move moves the fleet's namespaces with one mover.
func (l *lab) move(ctx context.Context, tl *mover.Timeline, m, name string, f *fleet.Fleet) error {
	ctx, cancel := context.WithTimeout(ctx, moveBound)
	defer cancel()
	if m == moverClusterctl {
		_, err := l.cc.Move(ctx, tl, f.Namespaces)
		return err
	}
	var options []mover.SpecOption
	if m == moverOperatorCarry {
		options = append(options, mover.CarryStatus)
	}
	_, mo, err := l.op.Move(ctx, tl, name, f.Namespaces, options...)
	if err != nil {
		return err
	}
	defer func() { _ = l.op.Delete(context.WithoutCancel(ctx), mo) }()
	if mo.Status.Phase != "Done" {
		return fmt.Errorf("MoveOperation %s ended in phase %s: %s: %s", mo.Name, mo.Status.Phase, mo.Status.FailureReason, mo.Status.FailureMessage)
	}
	return nil
}

// count computes the figures of a run; late writes are those between read
// and copied.
func (l *lab) count(r *result, mark takeover.Mark, keep func(string, string) bool, read, copied time.Time, arm *armed) {
	churn := takeover.ChurnSince(l.env, mark, keep)
	r.vmCreated, r.vmDeleted, r.vmPoweredOff = churn.Count(cloud.Created), churn.Count(cloud.Deleted), churn.Count(cloud.PowerOff)
	r.machinesCreated, r.machinesDeleted = churn.MachinesCreated(), churn.MachinesDeleted()
	r.hostsProvisioned = churn.Count(cloud.Provision)
	r.vmCreated += churn.CountDev(inmemorycloud.Created)
	r.vmDeleted += churn.CountDev(inmemorycloud.Deleted)
	expectedVM := arm.expectedVM
	for _, e := range churn.VMs {
		if e.Type == cloud.Created && e.VMName == expectedVM && expectedVM != "" {
			// The scenario's own scale-up, once; a second create of the
			// same VM would be the move's doing.
			r.vmCreated--
			expectedVM = ""
		}
	}
	if arm.remediation != "" && l.remediatedOnceInTarget(churn, mark, arm.remediation, copied) {
		r.machinesCreated--
		r.machinesDeleted--
		r.vmCreated--
		r.vmDeleted--
		r.vmPoweredOff--
		r.sequence = append(r.sequence, "(one remediation of "+arm.remediation+" in the target after the move: expected, not counted)")
	}
	for _, side := range []struct {
		m    *testenv.Management
		from int
	}{{l.env.Source, mark.SourceWrites()}, {l.env.Target, mark.TargetWrites()}} {
		for _, w := range takeover.Writes(side.m, side.from, keep) {
			if w.Succeeded() && !read.IsZero() && w.Time.After(read) && w.Time.Before(copied) && w.Kind != "Event" {
				r.lateWrites = append(r.lateWrites, w)
			}
		}
	}
	for _, w := range churn.Machines {
		r.sequence = append(r.sequence, w.String())
	}
}

// remediatedOnceInTarget reports whether the run's churn is exactly one
// remediation of machine: its deletion and one new Machine, both by the
// target's controllers after copied, its VM powered off and deleted, and
// one VM created.
func (l *lab) remediatedOnceInTarget(churn takeover.Churn, mark takeover.Mark, machine string, copied time.Time) bool {
	if len(churn.Machines) != 2 || churn.Count(cloud.Created) != 1 || churn.Count(cloud.Deleted) != 1 || churn.Count(cloud.PowerOff) != 1 {
		return false
	}
	inTarget := map[string]bool{}
	for _, w := range takeover.Writes(l.env.Target, mark.TargetWrites(), func(string, string) bool { return true }) {
		if w.Kind == "Machine" && w.Succeeded() && w.Time.After(copied) {
			verb := w.Verb
			if takeover.Created(w) {
				verb = "create"
			}
			inTarget[verb+" "+w.Name] = true
		}
	}
	deletedHere, createdHere := inTarget["delete "+machine], false
	for k := range inTarget {
		createdHere = createdHere || strings.HasPrefix(k, "create ")
	}
	return deletedHere && createdHere
}

// sequence merges the scenario's steps and the cloud's events of the run.
func (l *lab) sequence(log *eventLog, tl *mover.Timeline, mark takeover.Mark, keep func(string, string) bool) []string {
	var out []string
	for _, e := range log.all() {
		out = append(out, e.at.Format("15:04:05.000")+" "+e.what)
	}
	out = append(out, tl.Began.Format("15:04:05.000")+" the move starts")
	for _, e := range takeover.ChurnSince(l.env, mark, keep).VMs {
		if e.Type == cloud.Provision {
			out = append(out, fmt.Sprintf("%s cloud: Provision host %s with %s by the %s cluster's BareMetalHost controller", e.Time.Format("15:04:05.000"), e.Host, e.Image, e.Caller.ManagementCluster))
			continue
		}
		out = append(out, fmt.Sprintf("%s cloud: %s VM %s (%s) by %s", e.Time.Format("15:04:05.000"), e.Type, e.VMName, e.VMID, e.Caller))
	}
	for _, e := range takeover.ChurnSince(l.env, mark, keep).DevVMs {
		out = append(out, fmt.Sprintf("%s in-memory cloud: %s", e.At.Format("15:04:05.000"), e))
	}
	return out
}

// waitSettledInSource waits until the fleet is Available, its hosts
// provisioned, and no controller has written to it for quietBefore.
func (l *lab) waitSettledInSource(ctx context.Context, f *fleet.Fleet, keep func(string, string) bool) error {
	return takeover.Poll(ctx, settleBefore, func() error {
		if err := takeover.Available(ctx, l.env.Source, f); err != nil {
			return err
		}
		if err := takeover.Running(ctx, l.env.Source, f); err != nil {
			return err
		}
		if err := hostsProvisioned(ctx, l.env.Source, f); err != nil {
			return err
		}
		return takeover.Quiet(l.env.Source, keep, quietBefore)
	})
}

// hostsProvisioned returns why a host of the fleet is not provisioned for
// its consumer as m holds it, or m lacks one.
func hostsProvisioned(ctx context.Context, m *testenv.Management, f *fleet.Fleet) error {
	want := 0
	for _, wc := range f.Clusters {
		want += len(wc.Hosts)
	}
	n, err := hostprovider.CheckProvisioned(ctx, m.Client, f.Namespaces)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if n != want {
		return fmt.Errorf("%s holds %d of the fleet's %d BareMetalHosts", m.Name, n, want)
	}
	return nil
}

// settleInTarget waits until the target's controllers have reconciled the
// fleet (every Cluster Available, every Machine and MachinePool Running,
// every status computed for the current generation, every host
// provisioned for its consumer's copy), then checks it stays Available for
// the settle window.
func (l *lab) settleInTarget(ctx context.Context, f *fleet.Fleet) (bool, string) {
	began := time.Now()
	err := takeover.Poll(ctx, settleAfter, func() error {
		if err := takeover.Available(ctx, l.env.Target, f); err != nil {
			return err
		}
		if err := hostsProvisioned(ctx, l.env.Target, f); err != nil {
			return err
		}
		return takeover.Running(ctx, l.env.Target, f)
	})
	if err != nil {
		return false, "(not within " + settleAfter.String() + ": " + err.Error() + ")"
	}
	reconciled := time.Since(began)
	end := time.Now().Add(l.settle)
	for time.Now().Before(end) {
		if err := takeover.Available(ctx, l.env.Target, f); err != nil {
			return false, fmt.Sprintf("(reconciled in %s, then: %v)", reconciled.Round(time.Second), err)
		}
		time.Sleep(2 * time.Second)
	}
	return true, fmt.Sprintf("(reconciled %s after the move, Available for %s)", reconciled.Round(time.Second), l.settle)
}

// removeFleet deletes the fleet's namespaces in both clusters without
// waiting: the controllers clean up behind.
func (l *lab) removeFleet(f *fleet.Fleet) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range []*testenv.Management{l.env.Source, l.env.Target} {
		for _, ns := range f.Namespaces {
			_ = m.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	}
}
