package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// mover is one way of moving a fleet. Only move is timed and only what
// happens between prepare and finish is counted in the API servers'
// request counters and the processes' CPU time.
type mover interface {
	// prepare does the untimed setup (starting the operator, building
	// clients) and returns the processes of its own to account for.
	prepare(ctx context.Context) ([]component, error)
	// move moves the fleet and fills the timings of r.
	move(ctx context.Context, r *result) error
	// finish reads the figures only the mover knows and undoes prepare; it
	// runs whenever prepare succeeded.
	finish(ctx context.Context, r *result) error
}

// result is one move of one fleet by one mover.
type result struct {
	tool   string
	n, rep int
	// position is the order of the move in its repetition (1: first).
	position int
	// objects is how many objects were moved: those relocated from the
	// fleet's namespace plus the ClusterClass namespace's copied ones.
	objects int
	// whole is the whole move as its user waits for it; copyDelete is the
	// part that creates the objects in the target and deletes them from
	// the source, made of copy and then delete.
	whole, copyDelete, copy, delete time.Duration
	// requests are the requests each API server served during the move,
	// by verb, background included.
	requests map[string]requestCounts
	// webhooks are the admission webhook calls each API server made.
	webhooks map[string]webhookUse
	// storage is the lists each API server made of etcd.
	storage map[string]storageReads
	// cpu is the CPU time of each process during the move.
	cpu cpuSample
	// operator only: its peak RSS, the phases as seen by watching the
	// MoveOperation, and the requests its own clients counted, by cluster.
	peakRSS uint64
	// peakHeap is the largest live heap the heap profiles showed (only
	// with -heap-profile).
	peakHeap uint64
	// statusBytes is the largest the MoveOperation's status was, as JSON,
	// over the move.
	statusBytes    int
	phases         []phaseSpan
	clientRequests map[string]requestCounts
	// down is how long the move kept each cluster's controllers from
	// running, by cluster ("source", "target"): the operator's and
	// clusterctl's moves only (see downWindow).
	down map[string]downWindow
}

// phaseSpan is how long the operator stayed in a phase.
type phaseSpan struct {
	phase    string
	duration time.Duration
}

// line is the one-line progress report of a result.
func (r *result) line() string {
	s := fmt.Sprintf("%-10s %5d objects  whole %7s  copy+delete %7s (copy %s, delete %s)  requests source %s, target %s",
		r.tool, r.objects, seconds(r.whole), seconds(r.copyDelete), seconds(r.copy), seconds(r.delete),
		fmt.Sprintf("%.0f", r.requests["source"].total()), fmt.Sprintf("%.0f", r.requests["target"].total()))
	if r.peakRSS > 0 {
		s += fmt.Sprintf("  peak RSS %.0f MiB", mib(r.peakRSS))
	}
	if r.peakHeap > 0 {
		s += fmt.Sprintf("  peak heap %.0f MiB", mib(r.peakHeap))
	}
	if r.statusBytes > 0 {
		s += fmt.Sprintf("  status %.1f KiB", float64(r.statusBytes)/1024)
	}
	for _, server := range []string{"source", "target"} {
		if w := r.webhooks[server]; w.calls > 0 {
			s += fmt.Sprintf("\n             %s webhooks: %.0f calls, %.1fs (%s)", server, w.calls, w.seconds, w.slowest(3))
		}
	}
	for _, server := range []string{"source", "target"} {
		if st := r.storage[server]; st.lists.total() > 0 {
			s += fmt.Sprintf("\n             %s lists from etcd: %.0f, %.0f objects read (%s)", server,
				st.lists.total(), st.fetched.total(), st.largest(3))
		}
	}
	if len(r.down) > 0 {
		s += "\n             controllers down: " + describeDown(r.down)
	}
	if len(r.phases) > 0 {
		var parts []string
		for _, p := range r.phases {
			parts = append(parts, fmt.Sprintf("%s %.1fs", p.phase, p.duration.Seconds()))
		}
		s += "\n             phases: " + strings.Join(parts, ", ")
	}
	return s
}

func (b *bench) newMover(f benchFleet) mover {
	switch f.tool {
	case toolClusterctl:
		return &clusterctlMover{b: b, f: f}
	case toolOperator:
		return &operatorMover{b: b, f: f}
	case toolOperatorCarry:
		return &operatorMover{b: b, f: f, status: movev1alpha1.ObjectStatusCarry}
	case toolParity:
		return &baselineMover{b: b, f: f, parity: &parityWrites{carry: b.opts.carry, statusSubresource: b.clusters.statusSubresource}}
	default:
		return &baselineMover{b: b, f: f}
	}
}

// measure moves f with its mover, counts the requests and CPU time the move
// cost into r, and checks that the move happened.
func (b *bench) measure(ctx context.Context, f benchFleet, r *result) (err error) {
	c := b.clusters
	before, err := c.place(ctx, f)
	if err != nil {
		return err
	}
	r.objects = before.source.total() + before.sourceClasses.total()
	m := b.newMover(f)
	own, err := m.prepare(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if finishErr := m.finish(ctx, r); finishErr != nil {
			err = errors.Join(err, finishErr)
		}
	}()
	// The watches list before the counters are read and end after, so
	// that their requests count in no move.
	watch, err := b.watchControllers(ctx, f)
	if err != nil {
		return err
	}
	defer watch.stop()
	components := append(append([]component{}, c.components...), own...)
	samplesBefore, err := c.sample(ctx)
	if err != nil {
		return err
	}
	cpuBefore := sampleCPU(components)
	var prof *profiler
	if b.opts.profileDir != "" {
		prof, err = startProfiles(ctx, b.opts.profileDir, fmt.Sprintf("n%d-r%d-%s", r.n, r.rep, fileTag(r.tool)),
			map[string]*rest.Config{"source": c.env.Source.Config, "target": c.env.Target.Config})
		if err != nil {
			return err
		}
	}

	moveErr := m.move(ctx, r)
	if err := errors.Join(moveErr, prof.stop()); err != nil {
		return err
	}

	cpuAfter := sampleCPU(components)
	samplesAfter, err := c.sample(ctx)
	if err != nil {
		return err
	}
	r.down = watch.finish(ctx, windowGrace)
	r.cpu = cpuAfter.sub(cpuBefore)
	r.requests, r.webhooks = map[string]requestCounts{}, map[string]webhookUse{}
	r.storage = map[string]storageReads{}
	for name, s := range samplesAfter {
		was := samplesBefore[name]
		r.requests[name] = s.requests.sub(was.requests)
		r.webhooks[name] = s.webhooks.sub(was.webhooks)
		r.storage[name] = s.storage.sub(was.storage)
	}
	if err := c.classes.failed(); err != nil {
		return fmt.Errorf("the target's ClusterClass stand-in: %w", err)
	}
	after, err := c.place(ctx, f)
	if err != nil {
		return err
	}
	return verifyMoved(before, after)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
