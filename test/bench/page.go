package main

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The page -out writes, docs/benchmarks.md for make bench: written whole
// from one run, as make safety writes docs/safety.md, so that every figure
// on it comes from the run it names and nothing is edited by hand. What is
// true whatever the figures are (the movers, the method, what the figures
// mean, the limits) is written here; what depends on the run (the command,
// the machine, the tables, the findings) is read from it. The page keeps
// no history: earlier runs are in git.

// defaultBenchOut is where make bench writes the page.
const defaultBenchOut = "docs/benchmarks.md"

func (r *report) page() string {
	var b strings.Builder
	m := r.machine
	b.WriteString("# Benchmarks: move-operator against `clusterctl move`\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (`test/bench`) from one run on %s: %d cores, %s in all. "+
		"Do not edit by hand: run it again ([How to reproduce](#how-to-reproduce)).\n\n", m.date, m.cores, r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "`make bench` moves identical fleets of Cluster API workload clusters between two local management clusters, "+
		"with each mover in turn, and reports how long each move took, how many API requests it cost each API server, how long "+
		"it kept the fleet's controllers from running, how much CPU every process spent and how much memory the operator needed. "+
		"This run compared %s, at %s.\n", joinWords(r.moverNames()), r.sizeWords())
	if narrowed := r.narrowing(); narrowed != "" {
		fmt.Fprintf(&b, "\n%s\n", narrowed)
	}
	r.writeRun(&b)
	r.writeCompared(&b)
	b.WriteString(measured)
	r.writeResults(&b)
	r.writeMeaning(&b)
	r.writeReproduce(&b)
	r.writeLimits(&b)
	return b.String()
}

// moverNames are the movers that moved in this run, as the page names
// them.
func (r *report) moverNames() []string {
	var out []string
	for _, tool := range tools {
		if r.ran(tool) {
			out = append(out, moverWords[tool])
		}
	}
	return out
}

var moverWords = map[string]string{
	toolClusterctl:    "clusterctl",
	toolOperator:      "the operator",
	toolOperatorCarry: "the operator carrying status",
	toolBaseline:      "the baseline",
	toolParity:        "the parity floor",
}

// sizeWords says the fleet sizes and repetitions: "N=1 and N=10 workload
// clusters, one repetition each".
func (r *report) sizeWords() string {
	var parts []string
	for _, n := range r.opts.sizes {
		reps := r.opts.repetitions(n)
		parts = append(parts, fmt.Sprintf("N=%s (%s)", thousands(n), plural(reps, "repetition")))
	}
	kind := "workload clusters"
	if r.opts.capd {
		kind = "workload clusters of CAPD's in-memory provider"
	}
	return joinWords(parts) + " " + kind
}

// narrowing says, when the run left its defaults, what it changed and
// what that means for its figures.
func (r *report) narrowing() string {
	var set []string
	for _, f := range r.opts.flags {
		if f.set && f.name != "out" {
			set = append(set, "-"+f.name+" "+quoteArg(f.value))
		}
	}
	if len(set) == 0 {
		return ""
	}
	return fmt.Sprintf("**Not the default run.** This run set %s (see [The run](#the-run)); `make bench` alone runs %s, "+
		"which takes hours on 2 cores. The figures below are this run's, at these sizes and repetitions only.",
		joinWords(quoted(set)), defaultPlan(r.opts.flags))
}

// defaultPlan says what the default run measures, from the flags'
// defaults.
func defaultPlan(flags []flagSetting) string {
	if len(flags) == 0 {
		defaults, _ := parseOptions(nil)
		flags = defaults.flags
	}
	def := map[string]string{}
	for _, f := range flags {
		def[f.name] = f.def
	}
	return fmt.Sprintf("`-n %s -reps %s`", def["n"], def["reps"])
}

func (r *report) writeRun(b *strings.Builder) {
	m := r.machine
	b.WriteString("\n## The run\n\n")
	fmt.Fprintf(b, "- Command: %s\n", r.commandWords())
	fmt.Fprintf(b, "- Machine: %d cores (%s), %s memory, %s, %s\n", m.cores, m.cpuModel, gibibytes(m.memory), m.kernel, m.goVersion)
	fmt.Fprintf(b, "- Load average (1, 5, 15 minutes) before and after: %s / %s%s\n", m.loadBefore, m.loadAfter, r.busyWords())
	fmt.Fprintf(b, "- Operator: %s; working tree at commit %s\n", m.operator, m.commit)
	fmt.Fprintf(b, "- Settings: %s\n", m.settings)
	fmt.Fprintf(b, "- Repetitions: %s, %s%s\n", r.opts.plan(), r.rotation(), r.where())
	var idle []string
	for _, n := range r.opts.sizes {
		if rates, ok := r.idle[n]; ok {
			idle = append(idle, fmt.Sprintf("N=%d: source %.1f/s, target %.1f/s", n, rates["source"], rates["target"]))
		}
	}
	if len(idle) > 0 {
		fmt.Fprintf(b, "- Background requests with nothing moving, counted in every request figure: %s\n", strings.Join(idle, "; "))
	}
	if r.opts.profileDir != "" {
		fmt.Fprintf(b, "- CPU profiles of both kube-apiservers during each move: %s (`go tool pprof -top %s/n<N>-r<repetition>-<mover>-<source|target>-*.pb.gz` merges the slices of one move)\n",
			r.opts.profileDir, r.opts.profileDir)
	}
	if r.opts.heapProfileDir != "" {
		fmt.Fprintf(b, "- The operator's heap at the peak of each move: %s\n", r.opts.heapProfileDir)
	}
}

// commandWords is the command of the run, as make bench ran it when it
// did, and as bin/bench saw it.
func (r *report) commandWords() string {
	direct := "`" + strings.Join(append([]string{"bin/bench"}, quoteArgs(r.opts.args)...), " ") + "`"
	env := ""
	if len(r.machine.env) > 0 {
		env = strings.Join(r.machine.env, " ") + " "
	}
	if !r.machine.viaMake {
		return "`" + env + direct[1:]
	}
	return fmt.Sprintf("`%s%s` (it runs %s)", env, makeCommand(r.opts.args), direct)
}

// makeCommand is the make bench command that runs bin/bench with args:
// -out is BENCH_OUT, the rest BENCH_ARGS.
func makeCommand(args []string) string {
	out := ""
	var rest []string
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || name != "out" {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		out = value
	}
	cmd := "make bench"
	if out != defaultBenchOut {
		cmd += " BENCH_OUT=" + quoteArg(out)
	}
	if len(rest) > 0 {
		cmd += " BENCH_ARGS='" + strings.ReplaceAll(strings.Join(quoteArgs(rest), " "), "'", `'\''`) + "'"
	}
	return cmd
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = quoteArg(a)
	}
	return out
}

// quoteArg quotes an argument for a shell when it needs it.
func quoteArg(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,=/:@%+") == "" {
		return a
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(a) + `"`
}

// busyWords says when the machine was busier than its cores.
func (r *report) busyWords() string {
	var most float64
	for _, load := range []string{r.machine.loadBefore, r.machine.loadAfter} {
		var one float64
		if _, err := fmt.Sscan(load, &one); err == nil {
			most = math.Max(most, one)
		}
	}
	if r.machine.cores == 0 || most <= float64(r.machine.cores) {
		return ""
	}
	return fmt.Sprintf(" (busy: more runnable processes than cores, so every figure is slower than on a quiet machine of %d cores, "+
		"and not every mover was slowed alike)", r.machine.cores)
}

func (r *report) writeCompared(b *strings.Builder) {
	b.WriteString("\n## What is compared\n\n")
	for _, tool := range tools {
		if r.ran(tool) {
			fmt.Fprintf(b, "- **%s**: %s\n", tool, r.moverText(tool))
		}
	}
	if out := r.leftOut(); len(out) > 0 {
		fmt.Fprintf(b, "\nLeft out of this run: %s.\n", strings.Join(out, "; "))
	}
	b.WriteString("\n")
	if r.opts.capd {
		fmt.Fprintf(b, "The fleet: N workload clusters of Cluster API's own development provider, CAPD %s with its in-memory "+
			"backend, made as a user makes them (half classic, half from upstream's ClusterClass template; one control-plane and "+
			"one worker Machine each) and provisioned by the source's live controllers; every controller runs in both clusters "+
			"throughout. clusterctl pauses the Clusters and leaves the controllers running; the operator stops them. The floors "+
			"do not run: they copy and delete without stopping or pausing anything, and the source's live controllers would take "+
			"their deletes for real ones.\n", r.machine.clusterAPI)
		return
	}
	b.WriteString("The fleet: N workload clusters, each with 3 control-plane and 3 worker Machines and the project's full fixture " +
		"object set (package `test/fleet`: about 45 objects per cluster, a third of the clusters ClusterClass-based with their " +
		"class in another namespace, a cluster-scoped identity with its credentials Secret), created by the bench and moved " +
		"with no controller running: what is timed is the movers alone.\n")
}

func (r *report) moverText(tool string) string {
	switch tool {
	case toolClusterctl:
		return fmt.Sprintf("`clusterctl move --namespace NS` through clusterctl %s's Go library, every provider running with its "+
			"admission webhooks, as a user runs it. It pauses the fleet's Clusters and ClusterClasses and leaves the controllers running.", r.machine.clusterAPI)
	case toolOperator:
		return "a MoveOperation for the same namespace, handled by the operator as it is installed (see [The run](#the-run)): " +
			"validation, scale-down of every provider in both clusters, the webhook bypass for its own requests, the record of the " +
			"plan, copy, delete, restore, and the check of a sample of the copies by the target's webhooks. Its copies start " +
			"without status (`spec.objectStatusPolicy: Rebuild`, the default), as clusterctl's do."
	case toolOperatorCarry:
		return "the same operator moving a fleet of its own with `spec.objectStatusPolicy: Carry` (`-carry`), in the same " +
			"rotation: each copy gets its original's status, the UIDs of moved objects in it rewritten to their copies'. Its cost " +
			"is measured against the default move of the same repetition."
	case toolBaseline:
		return "a floor, not a mover: the same objects created in the target and deleted from the source by plain parallel " +
			"requests with the operator's QPS, burst and concurrency, in ownership order, one PATCH dropping the finalizers " +
			"before each DELETE; no webhooks, no pausing, no records: what any mover can approach, not reach."
	case toolParity:
		return "the floor a faithful move is judged against: " + r.parityWrites() + "."
	}
	return ""
}

// leftOut names the movers a flag left out.
func (r *report) leftOut() []string {
	var out []string
	if r.opts.skipClusterctl {
		out = append(out, "clusterctl (`-skip-clusterctl`)")
	}
	switch {
	case r.opts.capd:
		out = append(out, "the floors (`-capd`: with live controllers they cannot run)")
	case r.opts.skipBaseline:
		out = append(out, "the baseline and the parity floor (`-skip-baseline`)")
	case r.opts.parityOnly:
		out = append(out, "the baseline (`-parity-only`)")
	case r.opts.skipParity:
		out = append(out, "the parity floor (`-skip-parity`)")
	}
	return out
}

// measured is the method: what each figure is and how it is taken.
const measured = `
## What is measured

A fresh pair of local management clusters per N (package ` + "`test/testenv`" + `: real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok processes, Cluster API installed as ` + "`clusterctl init`" + ` leaves it, its admission and conversion webhooks served by the bench process while each provider's Deployment has Ready pods). Each repetition creates one identical fleet per mover and moves them one after the other, the order rotating by one place per repetition so that no mover always finds the API servers holding another's fleet. After each move the target namespace must hold every object of each kind the source namespace held, and the source namespace none; a run fails loudly, keeping every log, when a move does not.

- **Whole move**: clusterctl's ` + "`Move`" + ` call; the operator from creating the MoveOperation to seeing it ` + "`Done`" + ` through a watch; the floors' copy+delete, reading the objects included.
- **Copy+delete**: clusterctl from its log line "Creating objects in the target cluster" to the one after its last delete; the operator from ` + "`Copying`" + ` to ` + "`RestoringTarget`" + `.
- **Controllers down**: from watches on both clusters. The operator: from the first provider Deployment at zero in a cluster to the last one Available again there. clusterctl leaves its controllers running but pauses the fleet's Clusters, which stops their reconciliation: from the first pause to the last unpause in the target (in the source, to the last paused Cluster deleted). "Either cluster" spans both.
- **API requests**: each kube-apiserver's ` + "`apiserver_request_total`" + ` before and after the move, by verb: every client, so it includes the background and what a move makes others do (the controller-manager, scheduler and kwok scaling the providers' ReplicaSets and pods when the operator stops and starts them). The operator's own count (its ` + "`rest_client_requests_total`" + `) is given beside it.
- **CPU**: user and system time of every process of both clusters, the bench and the operator during the move.
- **Memory**: the operator's peak RSS (` + "`VmHWM`" + `; a fresh process per move, so the peak is that move's), and with ` + "`-heap-profile`" + ` its peak live heap.
- **Medians and ratios**: each figure is the median over the repetitions; a ratio is taken within each repetition, between moves that met the same clusters and the same machine load, then the median of those.
`

func (r *report) writeResults(b *strings.Builder) {
	b.WriteString("\n## Results\n")
	sections := []struct {
		heading, lead string
		t             table
	}{
		{"Summary", "The whole move, its copy+delete, the requests and the operator's memory, by fleet size; the ratio rows compare " +
			"the operator's move with each other mover's of the same repetition.", r.summary()},
		{"Controllers down", "How long each mover kept the fleet's controllers from acting: the operator stops them; clusterctl " +
			"pauses the Clusters.", r.controllersDown()},
		{"The operator's phases", "Where the operator's move spends its time.", r.phases()},
		{"Requests", requestsLead, r.verbs()},
		{"Admission webhooks", "", r.webhooks()},
		{"Lists from etcd", "", r.storageReads()},
		{"CPU", "", r.cpu()},
		{"Memory", memoryLead, r.memory()},
		{"Every move", "Each move of the run, in the order it ran.", r.repetitions()},
	}
	for _, s := range sections {
		if len(s.t.rows) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n### %s\n\n", s.heading)
		if s.lead != "" {
			fmt.Fprintf(b, "%s\n\n", s.lead)
		}
		writeTable(b, s.t)
		if s.heading == "Memory" {
			r.writeCarry(b)
		}
	}
}

const requestsLead = "Every request each API server served during a move, by verb. The operator's fixed cost is in a handful of " +
	"places, whatever the fleet's size: an access review per cluster, verb and API group it needs (or resource, where no " +
	"group is granted whole) before it writes anything; reads of every moved kind where each is needed (the plan in " +
	"Validating, GitOps detection, the pause and the block-move wait in ScalingDown, the plan Copying records, and the " +
	"re-read of the moved set before the point of no return); a read of the target's kubeconfig Secret per reconcile, so " +
	"that a rotated credential is used at the next step; the status writes that report each step; and the work other clients " +
	"do because it stops and starts the providers' pods (the controller-manager, scheduler and kwok). Per object it " +
	"writes what a faithful move must: a create, the managed fields restored, and a delete, after a PATCH removing the " +
	"finalizers of an object that has some."

const memoryLead = "The operator is a fresh process for every move. It holds the most at the end of Copying, where the " +
	"moved-set check reads the source's graph again beside the recorded plan; the resident set is that live heap and what " +
	"Go's garbage collector lets grow above it (GOGC and GOMEMLIMIT: Settings, in [The run](#the-run)). What the graph and " +
	"the plan keep per object is measured without clusters by the tests named in [How to reproduce](#how-to-reproduce)."

// memory is the operator's peak RSS, live heap and status size.
func (r *report) memory() table {
	t := table{
		header: []string{"N", "mover", "objects", "peak RSS MiB (median)", "peak RSS MiB (highest)", "peak live heap MiB", "largest status KiB"},
		note: "Peak live heap: only with -heap-profile (\"-\" otherwise). Largest status: the MoveOperation's status as JSON, " +
			"the largest seen during the move; it stays far below the API server's object size limit however large the fleet.",
	}
	r.eachMover(func(n int, tool string, rs []*result) {
		if !isOperator(tool) {
			return
		}
		heap := "-"
		if h := highest(rs, func(res *result) float64 { return mib(res.peakHeap) }); h > 0 {
			heap = fmt.Sprintf("%.0f", h)
		}
		status := "-"
		if s := highest(rs, func(res *result) float64 { return float64(res.statusBytes) / 1024 }); s > 0 {
			status = fmt.Sprintf("%.1f", s)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(n), tool, fmt.Sprintf("%.0f", medianOf(rs, objectCount)),
			fmt.Sprintf("%.0f", medianOf(rs, peakRSSMiB)), fmt.Sprintf("%.0f", highest(rs, peakRSSMiB)), heap, status})
	})
	return t
}

// writeCarry states what carrying the status cost, or how to measure it:
// the API's documentation of spec.objectStatusPolicy sends readers here.
func (r *report) writeCarry(b *strings.Builder) {
	b.WriteString("\n### Carrying the status\n\n")
	b.WriteString("With `spec.objectStatusPolicy: Carry` every moved object's status is written to its copy through the status " +
		"subresource before any controller runs: one more PATCH per object that has a status, all in Copying. The status " +
		"travels with the object the copy has read already, so the move holds nothing more in memory.")
	costs := r.carryCosts()
	if len(costs) == 0 {
		b.WriteString(" This run did not measure it: `-carry` moves one more fleet per repetition with Carry and states its " +
			"cost against the default move of the same repetition.\n")
		return
	}
	b.WriteString(" Its cost in this run, against the default move (Rebuild) of the same repetition:\n\n")
	for _, c := range costs {
		fmt.Fprintf(b, "- **%s**: %s\n", c.title(), c.text())
	}
}

// figure is a table cell of figures: "3.7", "1,366", "0.96×", "2.1 (1 open)",
// "-", or empty.
var figure = regexp.MustCompile(`^(-|[0-9][0-9.,]*(×| \([0-9.+ ]+\)| \([0-9]+ open\))?)?$`)

// writeTable writes t as a Markdown table, then its note.
func writeTable(b *strings.Builder, t table) {
	fmt.Fprintf(b, "| %s |\n", strings.Join(t.header, " | "))
	// A column of figures is aligned right, one of words left.
	seps := make([]string, len(t.header))
	for i := range seps {
		seps[i] = "---:"
		if i == 0 || slices.ContainsFunc(t.rows, func(row []string) bool { return i < len(row) && !figure.MatchString(row[i]) }) {
			seps[i] = "---"
		}
	}
	fmt.Fprintf(b, "|%s|\n", strings.Join(seps, "|"))
	for _, row := range t.rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
	}
	if t.note != "" {
		fmt.Fprintf(b, "\n%s\n", t.note)
	}
}

// writeMeaning states what this run's figures say, size by size, then
// what holds for any run.
func (r *report) writeMeaning(b *strings.Builder) {
	b.WriteString("\n## What the figures mean\n\n")
	for _, n := range r.sizes() {
		if s := r.findings(n); s != "" {
			fmt.Fprintf(b, "- **N=%s** %s\n", thousands(n), s)
		}
	}
	if s := r.growth(); s != "" {
		fmt.Fprintf(b, "- %s\n", s)
	}
	if r.oneRepetition() {
		movers := len(moveOrder(1, r.opts.movers()))
		fmt.Fprintf(b, "- **One repetition.** At least one size ran once: each of its figures is one move, and a ratio follows "+
			"both movers' own spread between runs, which on shared cores is tens of percent. `-reps %d` (with %d movers) "+
			"gives every mover every place in the order once.\n", movers, movers)
	}
	b.WriteString(meaning)
}

// findings is what the figures at n say, in a few sentences.
func (r *report) findings(n int) string {
	op := r.of(n, toolOperator)
	if len(op) == 0 {
		return ""
	}
	var sentences []string
	if ctl := r.of(n, toolClusterctl); len(ctl) > 0 {
		sentences = append(sentences, fmt.Sprintf("The operator's whole move took %s, clusterctl's %s (%s), with %s clusterctl's "+
			"API requests (%.1f per object against %.1f)",
			secs(medianOf(op, wholeSeconds)), secs(medianOf(ctl, wholeSeconds)), times(r.ratio(n, toolClusterctl, wholeSeconds)),
			times(r.ratio(n, toolClusterctl, allRequests)), medianOf(op, perObjectRequests), medianOf(ctl, perObjectRequests)))
		if opDown, ctlDown := r.downSeconds(op), r.downSeconds(ctl); !math.IsNaN(opDown) && !math.IsNaN(ctlDown) {
			sentences = append(sentences, fmt.Sprintf("The operator kept the controllers down %s; clusterctl kept the Clusters paused %s",
				secs(opDown), secs(ctlDown)))
		}
	} else {
		sentences = append(sentences, fmt.Sprintf("The operator's whole move took %s, %.1f requests per object",
			secs(medianOf(op, wholeSeconds)), medianOf(op, perObjectRequests)))
	}
	peer := r.parityPeer()
	if x := r.ratioOf(n, peer, toolParity, copyDeleteSeconds); !math.IsNaN(x) {
		who := "The operator's"
		if peer != toolOperator {
			who = "The Carry move's"
		}
		s := fmt.Sprintf("%s copy+delete took %s the parity floor's (%s against %s)", who, times(x),
			secs(medianOf(r.of(n, peer), copyDeleteSeconds)), secs(medianOf(r.of(n, toolParity), copyDeleteSeconds)))
		if y := r.ratio(n, toolBaseline, copyDeleteSeconds); !math.IsNaN(y) {
			s += fmt.Sprintf(" and %s the baseline's", times(y))
		}
		sentences = append(sentences, s)
		if x < 1 {
			sentences = append(sentences, r.slowFloor(n, peer))
		}
	}
	sentences = append(sentences, fmt.Sprintf("Its peak RSS was %.0f MiB", medianOf(op, peakRSSMiB)))
	return fmt.Sprintf("(%s objects): ", thousands(int(medianOf(op, objectCount)))) + strings.Join(sentences, ". ") + "."
}

// slowFloor says why the parity floor took longer than the operator's
// move at n, which makes the same writes and more: its processes did not
// get the machine's cores while it moved.
func (r *report) slowFloor(n int, peer string) string {
	busy := func(res *result) float64 { return allCPUSeconds(res) / res.whole.Seconds() }
	return fmt.Sprintf("A floor slower than the move it bounds was slowed by something else: the machine's other load left its "+
		"processes %.2f cores busy against %.2f for the operator's move (the CPU table), so this ratio says nothing of the "+
		"operator's overhead", medianOf(r.of(n, toolParity), busy), medianOf(r.of(n, peer), busy))
}

// downSeconds is the median time rs kept the controllers of either
// cluster down, over the moves in which the window closed.
func (r *report) downSeconds(rs []*result) float64 {
	var xs []float64
	for _, res := range rs {
		if w := eitherCluster(res.down); w.stopped() && !w.open() {
			xs = append(xs, w.duration().Seconds())
		}
	}
	return median(xs)
}

// growth says how the operator's time per object changed with the fleet.
func (r *report) growth() string {
	sizes := r.sizes()
	if len(sizes) < 2 {
		return ""
	}
	first, last := sizes[0], sizes[len(sizes)-1]
	a, z := medianOf(r.of(first, toolOperator), msPerObject), medianOf(r.of(last, toolOperator), msPerObject)
	if math.IsNaN(a) || math.IsNaN(z) {
		return ""
	}
	s := fmt.Sprintf("**From N=%s to N=%s** the operator's whole move went from %.1f to %.1f ms per object", thousands(first), thousands(last), a, z)
	if c1, c2 := medianOf(r.of(first, toolClusterctl), msPerObject), medianOf(r.of(last, toolClusterctl), msPerObject); !math.IsNaN(c1) && !math.IsNaN(c2) {
		s += fmt.Sprintf(", clusterctl's from %.1f to %.1f ms", c1, c2)
	}
	return s + ". The operator's fixed cost (validation, stopping and starting the providers, the checks) weighs on small fleets."
}

func (r *report) oneRepetition() bool {
	return slices.ContainsFunc(r.sizes(), func(n int) bool { return r.opts.repetitions(n) == 1 })
}

// meaning is what holds for the figures of any run.
const meaning = `- **Against clusterctl.** clusterctl creates the objects one after the other; the operator creates each dependency group's objects in parallel (` + "`-concurrency`" + ` in flight per cluster), so the larger the fleet, the more that counts. At one workload cluster the operator's fixed cost (validation, the access reviews, stopping the providers in both clusters and waiting until their pods are gone, starting them again) weighs against clusterctl's sequential copy of a few dozen objects.
- **Against the floors.** The baseline is what plain requests cost; the parity floor adds what a faithful copy must write per object. The operator's copy+delete over the parity floor's is its own overhead: the records of the plan and of the copies that let it resume after a crash, the re-read of the moved set before the point of no return, the dry-run checks and the status it reports. How that ratio grows with N says whether the overhead grows with the fleet.
- **Controllers down.** The operator stops every provider in both clusters for the move, clusterctl only pauses the Clusters: a paused Cluster's controllers still run, and a provider that ignores the pause still acts (` + "`make safety`" + `, docs/safety.md, counts what each disturbs). A move's "controllers down" share is the part of the move during which nothing reconciles the fleet.
- **Lists from etcd.** While a provider is at zero its CRDs' conversion webhook is down, and each watch cache of a version other than the storage version that an event disturbs lists its whole resource from etcd every second until the provider is back. That load, which no client request shows, grows with the fleet for as long as the move lasts; ` + "`-conversion-while-stopped`" + ` measures the move with conversion served (not what real providers do).
`

func (r *report) writeReproduce(b *strings.Builder) {
	b.WriteString("\n## How to reproduce\n\n")
	fmt.Fprintf(b, "You need Go and a checkout; nothing else. This page's run:\n\n```sh\n%s\n```\n\n", r.reproduceCommand())
	fmt.Fprintf(b, "`make bench` builds the Kubernetes binaries once (`hack/kube-binaries.sh`, as `make test` does), builds `bin/bench` "+
		"from `test/bench`, takes the manager binary out of the image of the working tree (`make image` builds it into `bin/image`; "+
		"with `MOVE_OPERATOR_IMAGE_DIR` set the bench uses that one), and writes the report to the terminal and, whole, to "+
		"`%s` (`BENCH_OUT`). Other runs:\n\n", defaultBenchOut)
	fmt.Fprintf(b, "```sh\nmake bench                                   # the default run: %s; hours on 2 cores\n", strings.Trim(defaultPlan(r.opts.flags), "`"))
	b.WriteString("make bench BENCH_ARGS='-n 1,10 -reps 1'      # narrowed: the operator against clusterctl and the floors, under an hour\n")
	b.WriteString("make bench BENCH_ARGS='-capd -n 30 -reps 2'  # CAPD's in-memory provider, every controller live\n")
	b.WriteString("MOVE_OPERATOR_AUDIT=1 make bench BENCH_ARGS='-n 1 -reps 1 -keep-logs -skip-clusterctl'   # an audit log of every request\n")
	b.WriteString("go test -run 'TestThePlanOfAFleet|TestTheStatusPlan' -v ./internal/graph/   # what the graph and the status keep per object\n")
	b.WriteString("go test -run TestARecordedPlan -v ./internal/planrecord/                     # what the recorded plan keeps per object\n```\n\n")
	b.WriteString("With `MOVE_OPERATOR_AUDIT` set every local API server writes an audit log of every request (user, verb, resource, " +
		"time), kept with `-keep-logs` beside the other logs. The flags of `bin/bench` (`bin/bench -h`), with this run's values:\n\n")
	if len(r.opts.flags) == 0 {
		return
	}
	b.WriteString("| flag | this run | default | meaning |\n|---|---|---|---|\n")
	for _, f := range r.opts.flags {
		value := "default"
		if f.set {
			value = "`" + f.value + "`"
		}
		def := "none"
		if f.def != "" {
			def = "`" + f.def + "`"
		}
		fmt.Fprintf(b, "| `-%s` | %s | %s | %s |\n", f.name, value, def, strings.ReplaceAll(f.usage, "|", `\|`))
	}
}

// reproduceCommand is the command that runs this page's run again.
func (r *report) reproduceCommand() string {
	if r.machine.viaMake {
		return makeCommand(r.opts.args)
	}
	return "KUBEBUILDER_ASSETS=$(hack/kube-binaries.sh | tail -1) " + strings.Join(append([]string{"bin/bench"}, quoteArgs(r.opts.args)...), " ")
}

func (r *report) writeLimits(b *strings.Builder) {
	b.WriteString("\n## Known limits\n\n")
	b.WriteString(limits)
	if r.opts.podStartLatency == 0 {
		b.WriteString("- **Pods start at once.** kwok makes a scheduled pod Ready at once; a provider's pod on a real node does not " +
			"(Cluster API's manager Deployments probe readiness every 10 s, so the first probe after the start usually fails and " +
			"the next comes 10 s later). One such start is on the operator's path, the target's providers before it unpauses what " +
			"it moved, and none on clusterctl's. This run did not model it: `-pod-start-latency 10s` does.\n")
	} else {
		fmt.Fprintf(b, "- **Pods start after %s** (`-pod-start-latency`), as a provider's pod on a real node does once its readiness "+
			"probe passes. One such start is on the operator's path, the target's providers before it unpauses what it moved, "+
			"and none on clusterctl's.\n", r.opts.podStartLatency)
	}
	if !r.opts.capd {
		b.WriteString("- **No controller runs during these moves.** The static fleets are moved with nothing reconciling them: " +
			"what is timed is the movers alone. `-capd` moves fleets provisioned by live controllers; `make demo` and " +
			"`make safety` (docs/safety.md) move fleets with every controller live, the pivot included.\n")
	} else {
		b.WriteString("- **Live controllers.** The requests and the CPU include what the live controllers do while each mover " +
			"moves, so they are not comparable with a static fleet's. The target's providers start with N workload clusters to " +
			"connect to, which lengthens the operator's RestoringTarget.\n")
	}
}

// limits are what the figures of any run do not show.
const limits = `- **Local clusters on shared cores.** Both management clusters, the bench and the operator share the machine's cores: a mover's own CPU slows the API servers it waits for, which a real management cluster, with cores of its own, would not. Absolute times are this machine's; the ratios between movers of the same repetition are what carries over.
- **Two choices favour clusterctl.** Cluster API's Cluster webhook waits up to 2 s for a ClusterClass to be reconciled, which clusterctl's paused copies without status never are: on 2 cores clusterctl failed at the first ClusterClass-based Cluster. The bench therefore marks every ClusterClass in the target reconciled as soon as it appears, sparing clusterctl at least 2 s per such Cluster that a real target would cost it (the operator writes the classes' status and needs no help). And the providers' webhooks are served in the bench process, faster than through a Service.
- **The requests count every client.** An API server's counters include the background and the controller-manager's, scheduler's and kwok's work on the providers' pods; the operator's own count shows its part.
- **Only the sizes of the run.** How the operator's overhead and memory grow beyond them takes a run of its own: ` + "`-n 100,1000 -reps 1 -skip-clusterctl -parity-only -alone -heap-profile DIR`" + ` moves each fleet on a fresh pair of clusters holding it alone (otherwise the source holds every mover's fleet until its turn) and leaves out clusterctl, which creates one object at a time.
`

// joinWords joins "a", "b" and "c" as "a, b and c".
func joinWords(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func quoted(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "`" + w + "`"
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return "one " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// secs writes a duration in seconds: "3.7 s", "1,230 s".
func secs(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	if s >= 1000 {
		return thousands(int(math.Round(s))) + " s"
	}
	return fmt.Sprintf("%.1f s", s)
}

// gibibytes writes /proc/meminfo's "24683748 kB" as "23.5 GiB".
func gibibytes(kB string) string {
	var n float64
	if _, err := fmt.Sscanf(kB, "%f kB", &n); err != nil {
		return kB
	}
	return fmt.Sprintf("%.1f GiB", n/(1<<20))
}
