//go:build cluster

package movetest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/move"
)

// A crash sweep stops the operator before every one of its writes and
// checks that a fresh operator finishes the move as if nothing happened.
// One move per crash point costs a fleet and a whole move each (about 250
// points for a move, 100 for a rollback, ten seconds each). Instead, the
// writes are cut into sections, each the writes of one phase to one cluster
// with one verb on one kind (see sectionOf), and run j crashes the operator
// before the j-th write of every section, once per section, each time
// resuming with a fresh operator: runs 1..L, L the longest section, crash
// before every write, in L moves instead of one per write, and every crash
// costs a fresh operator's start rather than a move. A crash is followed by
// more crashes in later sections rather than by an uninterrupted run,
// which only makes each run harder to pass; the end state is checked after
// each run, and each crash is logged.

// CrashSections counts a run's writes per section and decides the crashes.
type CrashSections struct {
	// at is j: the run crashes before the j-th write of each section; 0
	// makes the reference run, which never crashes.
	at int64
	// fleet is the run's fleet name, which its objects' names begin with.
	fleet string
	// crashIn says whether a section takes part in the sweep.
	crashIn func(section string) bool
	// reference holds the writes of each section in the reference run. A
	// run crashes only at writes the reference made: a resumed operator
	// writes some things again (its status, what it cannot tell it did),
	// and crashing again at each of those would only repeat crash points.
	reference map[string]int64

	mu      sync.Mutex
	phase   movev1alpha1.MovePhase
	counts  map[string]int64
	order   []string
	crashed map[string]bool
	crashes []string
	began   time.Time
	// crashedAt is when the last crash happened, zero once a fresh
	// operator wrote again; resumes are those delays.
	crashedAt time.Time
	resumes   []time.Duration
}

// NewCrashSections starts counting the writes of run at (0: the reference
// run) of a sweep whose objects are named after fleet; crashIn, when set,
// limits the sweep to the sections it accepts.
func NewCrashSections(at int64, fleet string, crashIn func(string) bool, reference []SectionSize) *CrashSections {
	s := &CrashSections{at: at, fleet: fleet, crashIn: crashIn, reference: map[string]int64{}, counts: map[string]int64{}, crashed: map[string]bool{}, began: time.Now()}
	for _, r := range reference {
		s.reference[r.section] = r.writes
	}
	return s
}

// sectionOf names the section a write belongs to: the phase the move is
// in, the cluster, the verb, the kind written, and which of the fleet's
// workload clusters the object belongs to by its name (see owner).
// Sections are short (a few writes of one kind of one workload cluster in
// one phase), so that few runs cover them all, and they name a step of the
// move the same way in every run, whatever crashes came before.
func (s *CrashSections) sectionOf(w PendingWrite) string {
	phase := s.phase
	if phase == "" {
		phase = movev1alpha1.PhasePending
	}
	return fmt.Sprintf("%s: %s %s %s (%s)", phase, w.Cluster, w.Verb, KindOf(w.Obj), s.owner(w.Obj.GetName()))
}

// owner names what an object belongs to the same way in every run: a
// fleet's objects are named after its name, which differs from run to run,
// then the workload cluster's index, then parts of their own, some
// generated ("<fleet>-0-md-0-x7k2p"); what follows the fleet's name, up to
// the next dash, is the same in every run ("0", or "classes"). The
// records of the copies ("moveoperation-<uid>-copies-<group>-<hash>")
// belong to their group: one section per group.
func (s *CrashSections) owner(name string) string {
	if _, record, ok := strings.Cut(name, "-copies-"); ok {
		group, _, _ := strings.Cut(record, "-")
		return "copies of group " + group
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(name, s.fleet), "-")
	head, _, _ := strings.Cut(rest, "-")
	return head
}

// crash is OperatorOptions.CrashIf: it counts the write in its section and
// says whether the operator crashes before it.
func (s *CrashSections) crash(w PendingWrite) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.crashedAt.IsZero() {
		s.resumes = append(s.resumes, time.Since(s.crashedAt))
		s.crashedAt = time.Time{}
	}
	section := s.sectionOf(w)
	if _, seen := s.counts[section]; !seen {
		s.order = append(s.order, section)
	}
	s.counts[section]++
	if s.at == 0 || s.counts[section] != s.at || s.at > s.reference[section] || s.crashed[section] || (s.crashIn != nil && !s.crashIn(section)) {
		return false
	}
	s.crashed[section] = true
	s.crashedAt = time.Now()
	crashesMade.Add(1)
	s.crashes = append(s.crashes, fmt.Sprintf("%s at %s", section, time.Since(s.began).Round(100*time.Millisecond)))
	return true
}

// Observe is OperatorOptions.OnWrite: it follows the MoveOperation's phase
// from the operator's own status writes.
func (s *CrashSections) Observe(_, verb string, obj client.Object) {
	mo, ok := obj.(*movev1alpha1.MoveOperation)
	if !ok || verb != "patch/status" || mo.Status.Phase == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = mo.Status.Phase
}

// Options are the operator options that make an operator part of the run.
// It polls often: a sweep is many moves, and waits are most of a move. It
// copies in batches of sweepCopyBatch, so that the sweep crashes between
// the batches of a group too.
func (s *CrashSections) Options() OperatorOptions {
	return OperatorOptions{CrashIf: s.crash, OnWrite: s.Observe, PollInterval: 50 * time.Millisecond, Move: move.Options{CopyBatch: sweepCopyBatch}}
}

// sweepCopyBatch is the copy's batch in a sweep: a sweep's fleet has
// groups of up to a dozen objects, far below move.DefaultCopyBatch.
const sweepCopyBatch = 4

// Sizes returns the writes of each section that takes part in the sweep,
// in the order the run first wrote in them.
func (s *CrashSections) Sizes() []SectionSize {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SectionSize
	for _, section := range s.order {
		if s.crashIn == nil || s.crashIn(section) {
			out = append(out, SectionSize{section, s.counts[section]})
		}
	}
	return out
}

// LogCrashes logs the crashes the run made, in order, and how long a
// fresh operator took to write again after each.
func (s *CrashSections) LogCrashes(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.crashes) == 0 {
		return
	}
	var longest, total time.Duration
	for _, d := range s.resumes {
		total += d
		longest = max(longest, d)
	}
	t.Logf("crashed %d times, each resumed by a fresh operator (its first write %s after the crash on average, %s at most): before %s",
		len(s.crashes), (total / time.Duration(max(1, len(s.resumes)))).Round(10*time.Millisecond), longest.Round(10*time.Millisecond),
		strings.Join(s.crashes, "; "))
}

// SectionSize is how many writes the reference run made in a section.
type SectionSize struct {
	section string
	writes  int64
}

func (s SectionSize) String() string { return fmt.Sprintf("%s: %d", s.section, s.writes) }

// RunBound is how long a run may take to end its move: a move, and a
// fresh operator's start and first steps for each crash, at most one per
// section of the reference (the first run crashes in every section).
func RunBound(reference []SectionSize) time.Duration {
	return 4*time.Minute + time.Duration(len(reference))*3*time.Second
}

// Longest is the number of runs a sweep needs: its longest section's writes.
func Longest(sizes []SectionSize) int64 {
	var l int64
	for _, s := range sizes {
		l = max(l, s.writes)
	}
	return l
}

// TotalWrites is the number of crash points a sweep covers.
func TotalWrites(sizes []SectionSize) int64 {
	var n int64
	for _, s := range sizes {
		n += s.writes
	}
	return n
}

// Resumer keeps an operator running for a crash run: each time the
// running operator crashed, it starts a fresh one with the same options,
// until stopped. Crashes happen in any phase, Done included (the writes
// after Done), and whatever the test does next (its checks, deleting the
// MoveOperation) needs an operator that finishes them.
type Resumer struct {
	t    *testing.T
	opts OperatorOptions

	mu      sync.Mutex
	op      *Operator
	stopped chan struct{}
	done    chan struct{}
}

// StartResumer keeps an operator running until the test ends, starting a
// fresh one with opts each time the one running crashed.
func StartResumer(t *testing.T, first *Operator, opts OperatorOptions) *Resumer {
	r := &Resumer{t: t, opts: opts, op: first, stopped: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	t.Cleanup(r.Stop)
	return r
}

func (r *Resumer) loop() {
	defer close(r.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.stopped:
			return
		case <-tick.C:
		}
		r.mu.Lock()
		if r.op.Crashed.Load() {
			r.op.Stop()
			r.op = StartOperator(r.t, r.opts)
		}
		r.mu.Unlock()
	}
}

// Stop stops resuming and the operator running last.
func (r *Resumer) Stop() {
	select {
	case <-r.stopped:
		return
	default:
	}
	close(r.stopped)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	r.op.Stop()
}

// SweepRuns runs runs 1..runs of a sweep as subtests and logs the outcome.
// It says how many crashes the runs made against the reference's writes: a
// write the runs never reach (a resumed move takes another way) is a crash
// point not covered.
func SweepRuns(t *testing.T, name string, reference []SectionSize, began time.Time, run func(t *testing.T, j int64)) {
	failed := 0
	runs := Longest(reference)
	before := crashesMade.Load()
	for j := int64(1); j <= runs; j++ {
		if !t.Run(fmt.Sprintf("a crash before write %d of every section", j), func(t *testing.T) { run(t, j) }) {
			failed++
		}
	}
	t.Logf("%s: %d runs, %d failed, %d crashes for the reference's %d writes, in %s",
		name, runs, failed, crashesMade.Load()-before, TotalWrites(reference), time.Since(began).Round(time.Second))
}

// crashesMade counts the crashes of every run.
var crashesMade atomic.Int64

// KindOf names an object's kind for a log line.
func KindOf(obj client.Object) string {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk.Kind
	}
	name := fmt.Sprintf("%T", obj)
	return name[strings.LastIndex(name, ".")+1:]
}
