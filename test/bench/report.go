package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets for the operator at the largest N (no per-object write a
// move does not need), and the flatness of time per object.
const (
	targetWholeVsClusterctl      = 0.25
	targetWholeVsBaselineCopyDel = 2
	targetCPUMsPerObject         = 60
	targetRequestsPerObject      = 4
	targetPerObjectFlatness      = 1.5
	// A status far below the API server's object size limit
	// however large the fleet, and time per object at a thousand clusters
	// within 1.2× of a hundred's.
	targetStatusKiB          = 64
	targetPerObjectVsN100    = 1.2
	referenceSizeForFlatness = 100
	// The operator's own overhead over the work a faithful move
	// must do anyway (the parity floor), at N=100 and how it grows to
	// N=1,000, the whole move against clusterctl's at N=100, and the peak
	// RSS at N=1,000.
	targetSize                  = 100
	largeSize                   = 1000
	targetCopyDeleteVsParity    = 1.3
	targetParityRatioGrowth     = 1.15
	targetPeakRSSMiBAtLargeSize = 120
)

// report turns the results into tables: as text for the terminal, with the
// targets the operator is checked against while it is changed, and as the
// page -out writes (page.go), which states the figures and no verdicts.
type report struct {
	opts    options
	machine machineInfo
	results []*result
	idle    map[int]map[string]float64
	elapsed time.Duration
}

func newReport(opts options, machine machineInfo, results []*result, idle map[int]map[string]float64, elapsed time.Duration) *report {
	return &report{opts: opts, machine: machine, results: results, idle: idle, elapsed: elapsed}
}

// table is one table of the report.
type table struct {
	title  string
	note   string
	header []string
	rows   [][]string
}

func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.preamble())
	for _, c := range r.carryCosts() {
		fmt.Fprintf(&b, "\n%s: %s\n", c.title(), c.text())
	}
	for _, t := range r.tables() {
		fmt.Fprintf(&b, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		_ = tw.Flush()
		if t.note != "" {
			fmt.Fprintf(&b, "%s\n", t.note)
		}
	}
	return b.String()
}

// where says whether the movers of a repetition shared their clusters.
func (r *report) where() string {
	if r.opts.alone {
		return "; each move on a fresh pair of clusters holding only its fleet (-alone)"
	}
	return "; the movers of a repetition share a pair of clusters, the source holding every fleet not moved yet"
}

// rotation says how many movers each repetition ordered, and how.
func (r *report) rotation() string {
	n := len(moveOrder(1, r.opts.movers()))
	if n == 1 {
		return "one mover per repetition"
	}
	words := map[int]string{2: "two", 3: "three", 4: "four", 5: "five"}
	return fmt.Sprintf("the order of the %s movers rotating by one place per repetition", words[n])
}

func (r *report) preamble() string {
	m := r.machine
	lines := []string{
		fmt.Sprintf("Run: %s, %s in all", m.date, r.elapsed.Round(time.Second)),
		fmt.Sprintf("Command: %s", m.command),
		fmt.Sprintf("Machine: %d cores (%s), %s memory, %s, %s", m.cores, m.cpuModel, m.memory, m.kernel, m.goVersion),
		fmt.Sprintf("Operator: %s; working tree at commit %s", m.operator, m.commit),
		fmt.Sprintf("Settings: %s; repetitions: %s, %s%s", m.settings, r.opts.plan(), r.rotation(), r.where()),
		fmt.Sprintf("Load average before and after: %s / %s", m.loadBefore, m.loadAfter),
	}
	if r.opts.capd {
		lines = append(lines, "With -capd: each fleet is N workload clusters of Cluster API's own in-memory provider (CAPD v1.14.2; half classic, half from upstream's ClusterClass template; "+
			"one control-plane and one worker Machine each), provisioned by the source's live controllers; every controller runs in both clusters throughout; the floors do not run")
	}
	if r.opts.carry {
		lines = append(lines, "With -carry: the operator also moves a fleet of its own with spec.objectStatusPolicy Carry, in the same rotation; "+
			"its cost is the Carry move's against the operator's default move (Rebuild) of the same repetition")
	}
	if r.opts.movers().parity {
		lines = append(lines, "Parity floor: "+r.parityWrites())
	}
	var idle []string
	for _, n := range r.opts.sizes {
		if rates, ok := r.idle[n]; ok {
			idle = append(idle, fmt.Sprintf("N=%d: source %.1f/s, target %.1f/s", n, rates["source"], rates["target"]))
		}
	}
	if len(idle) > 0 {
		lines = append(lines, "Background requests with nothing moving (counted in every figure): "+strings.Join(idle, "; "))
	}
	if r.opts.profileDir != "" {
		lines = append(lines, fmt.Sprintf("CPU profiles of both kube-apiservers during each move in %s "+
			"(go tool pprof -top %s/n<N>-r<repetition>-<mover>-<source|target>-*.pb.gz merges the slices of one move)", r.opts.profileDir, r.opts.profileDir))
	}
	return strings.Join(lines, "\n")
}

func (r *report) tables() []table {
	out := []table{r.summary(), r.targets(), r.controllersDown(), r.phases(), r.verbs(), r.webhooks(), r.storageReads(), r.cpu(), r.repetitions()}
	return slices.DeleteFunc(out, func(t table) bool { return len(t.rows) == 0 })
}

// eachMover calls f with the results of each mover at each N, in the
// report's order, leaving out the movers that did not run at that N.
func (r *report) eachMover(f func(n int, tool string, rs []*result)) {
	for _, n := range r.sizes() {
		for _, tool := range tools {
			if rs := r.of(n, tool); len(rs) > 0 {
				f(n, tool, rs)
			}
		}
	}
}

// of returns the results of one mover at one N, by repetition.
func (r *report) of(n int, tool string) []*result {
	var out []*result
	for _, res := range r.results {
		if res.n == n && res.tool == tool {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rep < out[j].rep })
	return out
}

// sizes are the Ns with results.
func (r *report) sizes() []int {
	var out []int
	for _, n := range r.opts.sizes {
		if len(r.of(n, toolOperator))+len(r.of(n, toolClusterctl)) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// ratio is the median over the repetitions of f(operator)/f(other),
// taking both from the same repetition.
func (r *report) ratio(n int, other string, f func(*result) float64) float64 {
	return r.ratioOf(n, toolOperator, other, f)
}

// ratioOf is the median over the repetitions of f(tool)/f(other), taking
// both from the same repetition.
func (r *report) ratioOf(n int, tool, other string, f func(*result) float64) float64 {
	var ratios []float64
	for _, p := range r.pairs(n, tool, other) {
		if f(p.other) != 0 {
			ratios = append(ratios, f(p.tool)/f(p.other))
		}
	}
	return median(ratios)
}

// pair is two movers' moves of the same repetition.
type pair struct{ tool, other *result }

// pairs are the moves of tool and other at n, paired by repetition, for
// the repetitions in which both moved.
func (r *report) pairs(n int, tool, other string) []pair {
	var out []pair
	for _, x := range r.of(n, tool) {
		for _, y := range r.of(n, other) {
			if x.rep == y.rep {
				out = append(out, pair{tool: x, other: y})
			}
		}
	}
	return out
}

func medianOf(rs []*result, f func(*result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// The figures of a result the tables use.
var (
	wholeSeconds      = func(r *result) float64 { return r.whole.Seconds() }
	copyDeleteSeconds = func(r *result) float64 { return r.copyDelete.Seconds() }
	copySeconds       = func(r *result) float64 { return r.copy.Seconds() }
	deleteSeconds     = func(r *result) float64 { return r.delete.Seconds() }
	objectCount       = func(r *result) float64 { return float64(r.objects) }
	msPerObject       = func(r *result) float64 { return r.whole.Seconds() * 1000 / float64(r.objects) }
	sourceRequests    = func(r *result) float64 { return r.requests["source"].total() }
	targetRequests    = func(r *result) float64 { return r.requests["target"].total() }
	allRequests       = func(r *result) float64 { return sourceRequests(r) + targetRequests(r) }
	perObjectRequests = func(r *result) float64 { return allRequests(r) / float64(r.objects) }
	peakRSSMiB        = func(r *result) float64 { return mib(r.peakRSS) }
	allCPUSeconds     = func(r *result) float64 {
		s := 0.0
		for _, d := range r.cpu {
			s += d.Seconds()
		}
		return s
	}
	cpuMsPerObject = func(r *result) float64 { return allCPUSeconds(r) * 1000 / float64(r.objects) }
)

var tools = []string{toolClusterctl, toolOperator, toolOperatorCarry, toolBaseline, toolParity}

// operatorTools are the movers that run the operator: those with a peak
// RSS, phases and the operator's own request count.
var operatorTools = []string{toolOperator, toolOperatorCarry}

func isOperator(tool string) bool { return slices.Contains(operatorTools, tool) }

func (r *report) summary() table {
	t := table{
		title: "Summary: medians over the repetitions; ratios are the median of the ratios of each repetition's pair",
		header: []string{"N", "mover", "objects", "whole move s", "copy+delete s (copy + delete)", "ms/object (whole)",
			"requests source", "requests target", "requests/object", "peak RSS MiB"},
		note: "clusterctl's copy+delete runs from its log line \"Creating objects in the target cluster\" to the one after its last delete; " +
			"the operator's from the MoveOperation entering Copying to it entering RestoringTarget (as seen by a watch); " +
			"the baseline's and the parity floor's whole move is their copy+delete, reading the objects included.",
	}
	for _, n := range r.sizes() {
		for _, tool := range tools {
			rs := r.of(n, tool)
			if len(rs) == 0 {
				continue
			}
			rss := ""
			if isOperator(tool) {
				rss = fmt.Sprintf("%.0f", medianOf(rs, peakRSSMiB))
			}
			t.rows = append(t.rows, []string{
				fmt.Sprint(n), tool, fmt.Sprintf("%.0f", medianOf(rs, objectCount)),
				fmt.Sprintf("%.1f", medianOf(rs, wholeSeconds)),
				fmt.Sprintf("%.1f (%.1f + %.1f)", medianOf(rs, copyDeleteSeconds), medianOf(rs, copySeconds), medianOf(rs, deleteSeconds)),
				fmt.Sprintf("%.1f", medianOf(rs, msPerObject)),
				fmt.Sprintf("%.0f", medianOf(rs, sourceRequests)), fmt.Sprintf("%.0f", medianOf(rs, targetRequests)),
				fmt.Sprintf("%.1f", medianOf(rs, perObjectRequests)), rss,
			})
		}
		if len(r.of(n, toolClusterctl)) > 0 && len(r.of(n, toolOperator)) > 0 {
			x := func(f func(*result) float64) string { return times(r.ratio(n, toolClusterctl, f)) }
			t.rows = append(t.rows, []string{fmt.Sprint(n), "operator / clusterctl", "",
				x(wholeSeconds), x(copyDeleteSeconds), x(msPerObject), x(sourceRequests), x(targetRequests), x(perObjectRequests), ""})
		}
		if len(r.of(n, toolBaseline)) > 0 && len(r.of(n, toolOperator)) > 0 {
			x := func(f func(*result) float64) string { return times(r.ratio(n, toolBaseline, f)) }
			t.rows = append(t.rows, []string{fmt.Sprint(n), "operator / baseline", "",
				"", x(copyDeleteSeconds), "", x(sourceRequests), x(targetRequests), x(perObjectRequests), ""})
		}
		if peer := r.parityPeer(); len(r.pairs(n, peer, toolParity)) > 0 {
			x := func(f func(*result) float64) string { return times(r.ratioOf(n, peer, toolParity, f)) }
			t.rows = append(t.rows, []string{fmt.Sprint(n), peer + " / " + toolParity, "",
				"", x(copyDeleteSeconds), "", x(sourceRequests), x(targetRequests), x(perObjectRequests), ""})
		}
		if len(r.pairs(n, toolOperatorCarry, toolOperator)) > 0 {
			x := func(f func(*result) float64) string { return times(r.ratioOf(n, toolOperatorCarry, toolOperator, f)) }
			t.rows = append(t.rows, []string{fmt.Sprint(n), toolOperatorCarry + " / " + toolOperator, "",
				x(wholeSeconds), x(copyDeleteSeconds), x(msPerObject), x(sourceRequests), x(targetRequests), x(perObjectRequests), x(peakRSSMiB)})
		}
	}
	return t
}

// targets checks the overhead targets (against the parity floor and
// clusterctl, and the peak RSS) at the sizes they name, saying "not
// measured in this run" for a size the run did not measure, then the
// earlier targets they did not replace, at the largest N measured.
func (r *report) targets() table {
	t := table{
		title:  "The targets for the operator",
		header: []string{"target", "measured", "met", "by how much"},
		note: "Medians over the repetitions (peak RSS and status: the highest repetition). By how much: the margin to the target " +
			"when it is met, the excess over it and its share of the target when it is missed. " + r.whyMissed(),
	}
	peer := r.parityPeer()
	if r.opts.carry {
		t.note = "With -carry the parity floor writes every status, so the targets against it judge the operator's Carry move; " +
			"the others judge its default move (spec.objectStatusPolicy Rebuild). " + t.note
	}
	check := func(name string, value, limit float64, format string, measured bool) {
		t.rows = append(t.rows, targetRow(name, value, limit, format, measured))
	}
	// The overhead targets.
	cd100 := r.ratioOf(targetSize, peer, toolParity, copyDeleteSeconds)
	check(fmt.Sprintf("N=%d: copy+delete within %.1f× of the parity floor's", targetSize, targetCopyDeleteVsParity),
		cd100, targetCopyDeleteVsParity, "%.2f×", !math.IsNaN(cd100))
	whole100 := r.ratio(targetSize, toolClusterctl, wholeSeconds)
	check(fmt.Sprintf("N=%d: whole move at most %.2f× clusterctl's", targetSize, targetWholeVsClusterctl),
		whole100, targetWholeVsClusterctl, "%.2f×", !math.IsNaN(whole100))
	growth := r.ratioOf(largeSize, peer, toolParity, copyDeleteSeconds) / cd100
	check(fmt.Sprintf("N=%s: copy+delete over the parity floor's at most %.2f× that ratio at N=%d", thousands(largeSize), targetParityRatioGrowth, targetSize),
		growth, targetParityRatioGrowth, "%.2f×", !math.IsNaN(growth))
	rss := highest(r.of(largeSize, toolOperator), peakRSSMiB)
	check(fmt.Sprintf("N=%s: peak RSS at most %d MiB (highest repetition)", thousands(largeSize), targetPeakRSSMiBAtLargeSize),
		rss, targetPeakRSSMiBAtLargeSize, "%.0f MiB", rss > 0)

	// The earlier targets, at the largest N, but for those the overhead
	// targets replaced
	// (copy+delete against the baseline, the whole move against
	// clusterctl's and the peak RSS at the largest N).
	sizes := r.sizes()
	if len(sizes) == 0 || len(r.of(sizes[len(sizes)-1], toolOperator)) == 0 {
		return t
	}
	n := sizes[len(sizes)-1]
	// The baseline's whole move is its copy+delete.
	wholeVsBaseline := r.ratio(n, toolBaseline, wholeSeconds)
	check(fmt.Sprintf("N=%d: whole move at most %.0f× the baseline's copy+delete", n, float64(targetWholeVsBaselineCopyDel)), wholeVsBaseline,
		targetWholeVsBaselineCopyDel, "%.2f×", !math.IsNaN(wholeVsBaseline))
	cpu := medianOf(r.of(n, toolOperator), cpuMsPerObject)
	check(fmt.Sprintf("N=%d: CPU per moved object, all processes, at most %d ms", n, targetCPUMsPerObject), cpu, targetCPUMsPerObject, "%.0f ms", true)
	req := medianOf(r.of(n, toolOperator), perObjectRequests)
	check(fmt.Sprintf("N=%d: API requests per object (both servers, background included) at most %d", n, targetRequestsPerObject), req,
		targetRequestsPerObject, "%.1f", true)
	status := highest(r.of(n, toolOperator), func(res *result) float64 { return float64(res.statusBytes) / 1024 })
	check(fmt.Sprintf("N=%d: MoveOperation status at most %d KiB (largest seen during the move)", n, targetStatusKiB), status,
		targetStatusKiB, "%.1f KiB", status > 0)
	if n > referenceSizeForFlatness && len(r.of(referenceSizeForFlatness, toolOperator)) > 0 {
		per := medianOf(r.of(n, toolOperator), msPerObject) / medianOf(r.of(referenceSizeForFlatness, toolOperator), msPerObject)
		check(fmt.Sprintf("N=%d: time per object (whole move) within %.1f× of N=%d's", n, targetPerObjectVsN100, referenceSizeForFlatness),
			per, targetPerObjectVsN100, "%.2f×", true)
	}
	if len(sizes) > 1 {
		var per []float64
		for _, m := range sizes {
			per = append(per, medianOf(r.of(m, toolOperator), msPerObject))
		}
		spread := slices.Max(per) / slices.Min(per)
		check(fmt.Sprintf("time per object (whole move) flat within %.1f× from N=%d to N=%d", targetPerObjectFlatness, sizes[0], n),
			spread, targetPerObjectFlatness, "%.2f×", true)
	}
	return t
}

// targetRow is one target's row: its name, the value measured, whether it
// is met (at most limit), and by how much it is met or missed.
func targetRow(name string, value, limit float64, format string, measured bool) []string {
	if !measured || math.IsNaN(value) {
		return []string{name, "-", "not measured in this run", ""}
	}
	if value <= limit {
		return []string{name, fmt.Sprintf(format, value), "yes", fmt.Sprintf(format+" to spare", limit-value)}
	}
	return []string{name, fmt.Sprintf(format, value), "no",
		fmt.Sprintf(format+" over (%.0f %% above the target)", value-limit, (value/limit-1)*100)}
}

// whyMissed says where the reasons for a missed target are found: the
// profiles this run took, or the flags that take them.
func (r *report) whyMissed() string {
	var taken []string
	if r.opts.profileDir != "" {
		taken = append(taken, "the kube-apiservers' CPU profiles in "+r.opts.profileDir)
	}
	if r.opts.heapProfileDir != "" {
		taken = append(taken, "the operator's heap profiles at its peaks in "+r.opts.heapProfileDir)
	}
	if len(taken) == 0 {
		return "Why a target is missed is read from profiles, which this run did not take: -profile DIR (the API servers' CPU) " +
			"and -heap-profile DIR (the operator's heap at its peak) take them."
	}
	return "Why a target is missed is read from " + strings.Join(taken, " and ") + "."
}

// highest is the largest f over rs, 0 for none.
func highest(rs []*result, f func(*result) float64) float64 {
	out := 0.0
	for _, res := range rs {
		out = math.Max(out, f(res))
	}
	return out
}

// thousands writes n with a comma between thousands, as the docs do:
// "1,000".
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// parityPeer is the operator's move that writes what the parity floor
// writes per object: with -carry the floor writes every status, as the
// Carry move does; otherwise a reconciled ClusterClass's, as the default
// move does.
func (r *report) parityPeer() string {
	if r.opts.carry {
		return toolOperatorCarry
	}
	return toolOperator
}

// parityWrites says what the parity floor does beyond the baseline.
func (r *report) parityWrites() string {
	status := "the status of a ClusterClass reconciled at its generation through the status subresource before it, as the operator's " +
		"default move (spec.objectStatusPolicy Rebuild) writes it"
	if r.opts.carry {
		status = "the status of every kind with a status subresource through that subresource before it, as the operator's Carry move " +
			"writes it"
	}
	return "the baseline's requests in the same order and concurrency, and after each create a merge PATCH giving the copy the " +
		"source's managed fields (owner UIDs pointed at the copies) and " + status + "; deletion as the baseline's (one PATCH " +
		"dropping the finalizers, then the DELETE). The operator's copy+delete over the parity floor's is its own overhead over " +
		"the writes any faithful mover makes"
}

// phases is the operator's time per phase.
func (r *report) phases() table {
	var names []string
	for _, res := range r.results {
		for _, p := range res.phases {
			if !slices.Contains(names, p.phase) {
				names = append(names, p.phase)
			}
		}
	}
	// A mover column only when the operator moved with Carry too, so that
	// the table of a run without -carry is as it always was.
	operators := slices.DeleteFunc(slices.Clone(operatorTools), func(tool string) bool { return !r.ran(tool) })
	header := []string{"N"}
	if len(operators) > 1 {
		header = append(header, "mover")
	}
	t := table{
		title:  "Operator: seconds per phase (median)",
		header: append(append(header, names...), "whole move"),
		note:   "(start) is from creating the MoveOperation until the operator first wrote a phase; each phase lasts until the next one is seen.",
	}
	for _, n := range r.sizes() {
		for _, tool := range operators {
			rs := r.of(n, tool)
			if len(rs) == 0 {
				continue
			}
			row := []string{fmt.Sprint(n)}
			if len(operators) > 1 {
				row = append(row, tool)
			}
			t.rows = append(t.rows, phaseRow(row, names, rs))
		}
	}
	return t
}

// phaseRow completes row with the median seconds of each named phase and
// of the whole move over rs.
func phaseRow(row, names []string, rs []*result) []string {
	for _, name := range names {
		row = append(row, fmt.Sprintf("%.1f", medianOf(rs, func(res *result) float64 {
			for _, p := range res.phases {
				if p.phase == name {
					return p.duration.Seconds()
				}
			}
			return 0
		})))
	}
	return append(row, fmt.Sprintf("%.1f", medianOf(rs, wholeSeconds)))
}

// ran says whether tool moved at any N.
func (r *report) ran(tool string) bool {
	return slices.ContainsFunc(r.results, func(res *result) bool { return res.tool == tool })
}

var verbColumns = []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"}

// verbs is the API requests by server and verb.
func (r *report) verbs() table {
	t := table{
		title:  "API requests served, by verb (median)",
		header: append(append([]string{"N", "mover", "API server"}, verbColumns...), "other", "total"),
		note: "From each kube-apiserver's apiserver_request_total before and after the move: every client, background included. " +
			"\"operator's own count\" is the operator's rest_client_requests_total (client-go counts LISTs as GET).",
	}
	row := func(n int, who, server string, rs []*result, counts func(*result) requestCounts) {
		cells := []string{fmt.Sprint(n), who, server}
		for _, v := range verbColumns {
			cells = append(cells, fmt.Sprintf("%.0f", medianOf(rs, func(res *result) float64 { return counts(res)[v] })))
		}
		other := medianOf(rs, func(res *result) float64 {
			c := counts(res)
			o := c.total()
			for _, v := range verbColumns {
				o -= c[v]
			}
			return o
		})
		cells = append(cells, fmt.Sprintf("%.0f", other), fmt.Sprintf("%.0f", medianOf(rs, func(res *result) float64 { return counts(res).total() })))
		t.rows = append(t.rows, cells)
	}
	r.eachMover(func(n int, tool string, rs []*result) {
		for _, server := range []string{"source", "target"} {
			row(n, tool, server, rs, func(res *result) requestCounts { return res.requests[server] })
		}
		if isOperator(tool) {
			for _, server := range []string{"source", "target"} {
				row(n, tool+"'s own count", server, rs, func(res *result) requestCounts { return res.clientRequests[server] })
			}
		}
	})
	return t
}

// webhooks is the admission webhook calls the API servers made.
func (r *report) webhooks() table {
	t := table{
		title:  "Admission webhook calls made by the API servers (median)",
		header: []string{"N", "mover", "source calls", "source latency s", "target calls", "target latency s", "rejections"},
		note: "From apiserver_admission_webhook_admission_duration_seconds (latency summed over the calls, so concurrent calls add up) " +
			"and apiserver_admission_webhook_rejection_count. " +
			"The operator's own requests skip the webhooks of the controllers it stops (a matchCondition on its username); once the " +
			"target's controllers are back it sends a sample of the moved objects (spec.targetValidation) through them as dry-run " +
			"updates; the baseline runs with no webhooks at all.",
	}
	r.eachMover(func(n int, tool string, rs []*result) {
		use := func(server string, f func(webhookUse) float64) func(*result) float64 {
			return func(res *result) float64 { return f(res.webhooks[server]) }
		}
		calls := func(w webhookUse) float64 { return w.calls }
		secs := func(w webhookUse) float64 { return w.seconds }
		t.rows = append(t.rows, []string{fmt.Sprint(n), tool,
			fmt.Sprintf("%.0f", medianOf(rs, use("source", calls))), fmt.Sprintf("%.1f", medianOf(rs, use("source", secs))),
			fmt.Sprintf("%.0f", medianOf(rs, use("target", calls))), fmt.Sprintf("%.1f", medianOf(rs, use("target", secs))),
			fmt.Sprintf("%.0f", medianOf(rs, func(res *result) float64 {
				return res.webhooks["source"].rejections + res.webhooks["target"].rejections
			}))})
	})
	return t
}

// storageReads is what the API servers read from etcd by lists during the
// moves: mostly their own watch caches filling again (see storageReads in
// metrics.go), a cost no client request shows.
func (r *report) storageReads() table {
	t := table{
		title:  "Lists the API servers made of etcd (median)",
		header: []string{"N", "mover", "source lists", "source objects read", "target lists", "target objects read", "objects read per object moved"},
		note: "From apiserver_storage_list_total and apiserver_storage_list_fetched_objects_total. Clients' lists are served from " +
			"the watch caches; a watch cache lists its resource from etcd when its watch ends, and again every second while that " +
			"list fails. A CRD's watch cache of a version other than the storage version is filled through the conversion " +
			"webhook, which is down while the providers are scaled to zero: each such cache that an event disturbs then reads " +
			"its whole resource once a second until the providers are back. Movers that stop no controller do not cause it.",
	}
	r.eachMover(func(n int, tool string, rs []*result) {
		row := []string{fmt.Sprint(n), tool}
		for _, server := range []string{"source", "target"} {
			row = append(row,
				fmt.Sprintf("%.0f", medianOf(rs, func(res *result) float64 { return res.storage[server].lists.total() })),
				fmt.Sprintf("%.0f", medianOf(rs, func(res *result) float64 { return res.storage[server].fetched.total() })))
		}
		t.rows = append(t.rows, append(row, fmt.Sprintf("%.1f", medianOf(rs, func(res *result) float64 {
			return (res.storage["source"].fetched.total() + res.storage["target"].fetched.total()) / float64(res.objects)
		}))))
	})
	return t
}

var cpuColumns = []string{"source kube-apiserver", "source etcd", "target kube-apiserver", "target etcd", "others", "bench process", "operator"}

// cpu is the CPU time each process spent during the moves.
func (r *report) cpu() table {
	t := table{
		title:  "CPU seconds per process during the move (median)",
		header: append(append([]string{"N", "mover"}, cpuColumns...), "all", "CPU ms/object", "wall s", "cores busy"),
		note: "others: kube-controller-manager, kube-scheduler and kwok of both clusters. The bench process serves the providers' " +
			"webhooks (for every mover's writes that go through them) and runs clusterctl's library and the baseline. " +
			"cores busy is all CPU over the wall time, out of the machine's cores; other processes on the machine are not counted.",
	}
	cpuOf := func(res *result, column string) float64 {
		if column == "others" {
			return (res.cpu["source others"] + res.cpu["target others"]).Seconds()
		}
		return res.cpu[column].Seconds()
	}
	r.eachMover(func(n int, tool string, rs []*result) {
		row := []string{fmt.Sprint(n), tool}
		for _, c := range cpuColumns {
			row = append(row, fmt.Sprintf("%.1f", medianOf(rs, func(res *result) float64 { return cpuOf(res, c) })))
		}
		row = append(row, fmt.Sprintf("%.1f", medianOf(rs, allCPUSeconds)),
			fmt.Sprintf("%.0f", medianOf(rs, cpuMsPerObject)),
			fmt.Sprintf("%.1f", medianOf(rs, wholeSeconds)),
			fmt.Sprintf("%.2f", medianOf(rs, func(res *result) float64 { return allCPUSeconds(res) / res.whole.Seconds() })))
		t.rows = append(t.rows, row)
	})
	return t
}

// repetitions lists every move measured.
func (r *report) repetitions() table {
	t := table{
		title: "Every move",
		header: []string{"N", "repetition", "order", "mover", "objects", "whole move s", "copy s", "delete s",
			"requests source", "requests target", "peak RSS MiB"},
	}
	rs := slices.Clone(r.results)
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].n != rs[j].n {
			return rs[i].n < rs[j].n
		}
		if rs[i].rep != rs[j].rep {
			return rs[i].rep < rs[j].rep
		}
		return rs[i].position < rs[j].position
	})
	for _, res := range rs {
		rss := ""
		if res.peakRSS > 0 {
			rss = fmt.Sprintf("%.0f", peakRSSMiB(res))
		}
		t.rows = append(t.rows, []string{fmt.Sprint(res.n), fmt.Sprint(res.rep), fmt.Sprint(res.position), res.tool, fmt.Sprint(res.objects),
			fmt.Sprintf("%.1f", res.whole.Seconds()), fmt.Sprintf("%.1f", res.copy.Seconds()), fmt.Sprintf("%.1f", res.delete.Seconds()),
			fmt.Sprintf("%.0f", sourceRequests(res)), fmt.Sprintf("%.0f", targetRequests(res)), rss})
	}
	return t
}

func times(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

// controllersDown is how long each mover kept each cluster's controllers
// from running.
func (r *report) controllersDown() table {
	t := table{
		title:  "Controllers down: seconds each mover kept each cluster's controllers from running (median)",
		header: []string{"N", "mover", "source", "target", "either cluster", "whole move s", "either cluster / whole move"},
		note: "From watches the bench keeps on both clusters during each move. The operator: from the first provider Deployment " +
			"scaled to zero in that cluster to the last one Available again (kstatus Current, as the operator waits for it); " +
			"the target's providers come back in RestoringTarget, the source's in RestoringSource. clusterctl leaves its " +
			"controllers running but pauses the fleet's Clusters, which stops their reconciliation: from the first Cluster " +
			"paused to the last one unpaused in the target, and in the source to the last paused one gone (they are deleted " +
			"paused). Either cluster: from the first stop in either to the last restart in either (for clusterctl, the first " +
			"Cluster paused in the source to the last one unpaused in the target). The floors stop nothing. \"open\": not seen " +
			"running again within " + windowGrace.String() + " of the move's end.",
	}
	r.eachMover(func(n int, tool string, rs []*result) {
		if !slices.ContainsFunc(rs, func(res *result) bool { return len(res.down) > 0 }) {
			return
		}
		either := func(res *result) downWindow { return eitherCluster(res.down) }
		cluster := func(name string) func(*result) downWindow {
			return func(res *result) downWindow { return res.down[name] }
		}
		var shares []float64
		for _, res := range rs {
			if w := either(res); w.stopped() && !w.open() && res.whole > 0 {
				shares = append(shares, w.duration().Seconds()/res.whole.Seconds())
			}
		}
		shareCell := "-"
		if len(shares) > 0 {
			shareCell = fmt.Sprintf("%.2f", median(shares))
		}
		t.rows = append(t.rows, []string{fmt.Sprint(n), tool,
			medianWindow(rs, cluster("source")), medianWindow(rs, cluster("target")), medianWindow(rs, either),
			fmt.Sprintf("%.1f", medianOf(rs, wholeSeconds)), shareCell})
	})
	return t
}

// medianWindow is the median length of the windows w picks from rs, over
// the repetitions in which it closed, saying how many stayed open.
func medianWindow(rs []*result, w func(*result) downWindow) string {
	var xs []float64
	open := 0
	for _, res := range rs {
		switch win := w(res); {
		case win.open():
			open++
		case win.stopped():
			xs = append(xs, win.duration().Seconds())
		}
	}
	cell := "-"
	if len(xs) > 0 {
		cell = fmt.Sprintf("%.1f", median(xs))
	}
	if open > 0 {
		cell += fmt.Sprintf(" (%d open)", open)
	}
	return cell
}
