package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The report of -backup (backup.go): as text for the terminal and as the
// page make bench-backup writes whole, docs/benchmarks-backup.md, after
// every size measured, so that a run stopped midway leaves a page that
// says what it holds and what it lacks.

// defaultBackupOut is where make bench-backup writes the page.
const defaultBackupOut = "docs/benchmarks-backup.md"

// The targets set for backups and restores, reported against,
// never asserted: at N=100 each of the operator's backup and restore
// takes at most a quarter of clusterctl's time, and the operator's memory
// does not grow with the fleet, its peak RSS backing up N=1,000 at most
// 120 MiB.
const (
	targetBackupVsClusterctl  = 0.25
	targetRestoreVsClusterctl = 0.25
	targetBackupRSSMiB        = 120
)

// backupReport turns the backups and restores of a run into tables.
type backupReport struct {
	opts    options
	machine machineInfo
	results []*archiveResult
	// floors are the restore's floors (backupfloor.go).
	floors []*restoreFloor
	// measured are the sizes measured whole.
	measured []int
	// finished says the run ended (failure says how); a page written
	// between sizes is not finished.
	finished bool
	failure  error
	elapsed  time.Duration
}

// of are the results of one tool's backups or restores at n, in the
// order they ran, the -rss-n backup left out.
func (r *backupReport) of(n int, tool, op string) []*archiveResult {
	var out []*archiveResult
	for _, res := range r.results {
		if res.n == n && res.tool == tool && res.op == op && !res.rssOnly {
			out = append(out, res)
		}
	}
	return out
}

// sizes are the sizes with a result, in the order they ran.
func (r *backupReport) sizes() []int {
	var out []int
	for _, res := range r.results {
		if !res.rssOnly && !slices.Contains(out, res.n) {
			out = append(out, res.n)
		}
	}
	return out
}

// rssOnly is the -rss-n backup, if it ran.
func (r *backupReport) rssOnly() *archiveResult {
	for _, res := range r.results {
		if res.rssOnly {
			return res
		}
	}
	return nil
}

func wallSeconds(res *archiveResult) float64 { return res.wall.Seconds() }

func archiveRSSMiB(res *archiveResult) float64 { return mib(res.peakRSS) }

// medianArchive is the median of f over rs, NaN for none.
func medianArchive(rs []*archiveResult, f func(*archiveResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, res := range rs {
		xs[i] = f(res)
	}
	return median(xs)
}

// ratio is the median over the repetitions of the operator's figure over
// clusterctl's of the same repetition; NaN when no repetition has both.
func (r *backupReport) ratio(n int, op string, f func(*archiveResult) float64) float64 {
	var xs []float64
	for _, o := range r.of(n, toolOperator, op) {
		for _, c := range r.of(n, toolClusterctl, op) {
			if o.rep == c.rep && f(c) > 0 {
				xs = append(xs, f(o)/f(c))
			}
		}
	}
	return median(xs)
}

// summary is one row per tool and N, then the ratio row.
func (r *backupReport) summary() table {
	t := table{
		title: "Backup and restore, by fleet size (medians over the repetitions; ratios operator / clusterctl)",
		header: []string{"N", "tool", "backup s", "restore s", "objects in the backup", "objects restored",
			"backup size KiB", "peak RSS MiB, backup", "peak RSS MiB, restore"},
		note: "Objects in the backup: the operator's status.archive.objects, clusterctl's files (one per object). Objects restored: " +
			"the objects of the moved kinds the restored namespaces hold afterwards, checked equal, kind by kind, to what the " +
			"source's held, and the fleet's cluster-scoped identity and its credentials Secret, checked present. Backup size: the operator's " +
			"encrypted archive, clusterctl's directory of JSON files. Peak RSS: the operator's process (VmHWM), a fresh one for " +
			"each backup and each restore; clusterctl runs in the bench's process.",
	}
	for _, n := range r.sizes() {
		for _, tool := range []string{toolClusterctl, toolOperator} {
			backups, restores := r.of(n, tool, opBackup), r.of(n, tool, opRestore)
			if len(backups)+len(restores) == 0 {
				continue
			}
			row := []string{fmt.Sprint(n), tool,
				num(medianArchive(backups, wallSeconds), "%.1f"), num(medianArchive(restores, wallSeconds), "%.1f"),
				num(medianArchive(backups, func(res *archiveResult) float64 { return float64(res.objects) }), "%.0f"),
				num(medianArchive(restores, func(res *archiveResult) float64 { return float64(res.objects) }), "%.0f"),
				num(medianArchive(backups, func(res *archiveResult) float64 { return float64(res.bytes) / 1024 }), "%.0f"),
				"", ""}
			if tool == toolOperator {
				row[7] = num(medianArchive(backups, archiveRSSMiB), "%.0f")
				row[8] = num(medianArchive(restores, archiveRSSMiB), "%.0f")
			}
			t.rows = append(t.rows, row)
		}
		backup, restore := r.ratio(n, opBackup, wallSeconds), r.ratio(n, opRestore, wallSeconds)
		if !math.IsNaN(backup) || !math.IsNaN(restore) {
			count := func(res *archiveResult) float64 { return float64(res.objects) }
			size := r.ratio(n, opBackup, func(res *archiveResult) float64 { return float64(res.bytes) })
			t.rows = append(t.rows, []string{fmt.Sprint(n), toolOperator + " / " + toolClusterctl,
				times(backup), times(restore), times(r.ratio(n, opBackup, count)), times(r.ratio(n, opRestore, count)), times(size), "", ""})
		}
	}
	return t
}

// num writes x with format, "-" for NaN.
func num(x float64, format string) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf(format, x)
}

// targets checks the targets: met or not, by how much, or not
// measured in this run.
func (r *backupReport) targets() table {
	t := table{
		title:  "The targets for the operator (reported, never asserted)",
		header: []string{"target", "measured", "met", "by how much"},
		note: "By how much: the margin to the target when it is met, the excess over it and its share of the target when it is " +
			"missed. The ratios are the operator's time over clusterctl's in the same repetition, the median over the repetitions.",
	}
	backup := r.ratio(targetSize, opBackup, wallSeconds)
	t.rows = append(t.rows, targetRow(fmt.Sprintf("N=%d: backup at most %.2f× clusterctl's (--to-directory)", targetSize, targetBackupVsClusterctl),
		backup, targetBackupVsClusterctl, "%.2f×", !math.IsNaN(backup)))
	restore := r.ratio(targetSize, opRestore, wallSeconds)
	t.rows = append(t.rows, targetRow(fmt.Sprintf("N=%d: restore at most %.2f× clusterctl's (--from-directory)", targetSize, targetRestoreVsClusterctl),
		restore, targetRestoreVsClusterctl, "%.2f×", !math.IsNaN(restore)))
	rss := r.largeRSS()
	t.rows = append(t.rows, targetRow(fmt.Sprintf("N=%s: peak RSS of the operator's backup at most %d MiB", thousands(largeSize), targetBackupRSSMiB),
		rss, targetBackupRSSMiB, "%.0f MiB", rss > 0))
	return t
}

// largeRSS is the highest peak RSS of the operator's backups of
// largeSize clusters, the -rss-n one included; NaN when none ran.
func (r *backupReport) largeRSS() float64 {
	out := math.NaN()
	for _, res := range r.results {
		if res.n == largeSize && res.tool == toolOperator && res.op == opBackup && res.peakRSS > 0 {
			if math.IsNaN(out) || archiveRSSMiB(res) > out {
				out = archiveRSSMiB(res)
			}
		}
	}
	return out
}

// memory is the operator's peak RSS by fleet size: whether it grows with
// the fleet.
func (r *backupReport) memory() table {
	t := table{
		title:  "The operator's peak RSS by fleet size (MiB, highest repetition)",
		header: []string{"N", "objects in the backup", "backup", "restore"},
	}
	var ns []int
	for _, res := range r.results {
		if res.tool == toolOperator && !slices.Contains(ns, res.n) {
			ns = append(ns, res.n)
		}
	}
	slices.Sort(ns)
	for _, n := range ns {
		var backups, restores []*archiveResult
		for _, res := range r.results {
			if res.n == n && res.tool == toolOperator {
				if res.op == opBackup {
					backups = append(backups, res)
				} else {
					restores = append(restores, res)
				}
			}
		}
		t.rows = append(t.rows, []string{thousands(n),
			num(medianArchive(backups, func(res *archiveResult) float64 { return float64(res.objects) }), "%.0f"),
			num(highestArchive(backups, archiveRSSMiB), "%.0f"), num(highestArchive(restores, archiveRSSMiB), "%.0f")})
	}
	return t
}

func highestArchive(rs []*archiveResult, f func(*archiveResult) float64) float64 {
	if len(rs) == 0 {
		return math.NaN()
	}
	out := f(rs[0])
	for _, res := range rs[1:] {
		out = math.Max(out, f(res))
	}
	return out
}

// every lists each backup and restore in the order it ran.
func (r *backupReport) every() table {
	t := table{
		title:  "Every backup and restore, in the order it ran",
		header: []string{"N", "repetition", "order", "tool", "operation", "s", "objects", "peak RSS MiB", "of which its binary MiB", "the operator's phases"},
	}
	for _, res := range r.results {
		order := fmt.Sprint(res.position)
		if res.rssOnly {
			order = "alone (-rss-n)"
		}
		rss, binary := "", ""
		if res.peakRSS > 0 {
			rss = fmt.Sprintf("%.0f", archiveRSSMiB(res))
		}
		if res.fileRSS > 0 {
			binary = fmt.Sprintf("%.0f", mib(res.fileRSS))
		}
		t.rows = append(t.rows, []string{thousands(res.n), fmt.Sprint(res.rep), order, res.tool, res.op,
			fmt.Sprintf("%.1f", wallSeconds(res)), fmt.Sprint(res.objects), rss, binary, phaseWords(res.phases)})
	}
	return t
}

// phaseWords writes the phases as "Validating 0.4s, Copying 2.0s".
func phaseWords(spans []phaseSpan) string {
	parts := make([]string, len(spans))
	for i, p := range spans {
		parts[i] = fmt.Sprintf("%s %.1fs", p.phase, p.duration.Seconds())
	}
	return strings.Join(parts, ", ")
}

func (r *backupReport) tables() []table {
	return []table{r.summary(), r.targets(), r.floorTable(), r.memory(), r.every()}
}

// line is the one-line progress report of a result.
func (res *archiveResult) line() string {
	s := fmt.Sprintf("%-10s %-7s %6d objects  %7s  %.0f KiB", res.tool, res.op, res.objects, seconds(res.wall), float64(res.bytes)/1024)
	if res.peakRSS > 0 {
		s += fmt.Sprintf("  peak RSS %.0f MiB", archiveRSSMiB(res))
		if res.fileRSS > 0 {
			s += fmt.Sprintf(" (its binary %.0f MiB)", mib(res.fileRSS))
		}
	}
	if res.peakHeap > 0 {
		s += fmt.Sprintf("  peak heap %.0f MiB", mib(res.peakHeap))
	}
	if len(res.phases) > 0 {
		s += "\n             phases: " + phaseWords(res.phases)
	}
	return s
}

// text is the report for the terminal.
func (r *backupReport) text() string {
	var b strings.Builder
	if s := r.state(); s != "" {
		fmt.Fprintf(&b, "%s\n", s)
	}
	for _, t := range r.tables() {
		if len(t.rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		_ = tw.Flush()
	}
	return b.String()
}

// state says, unless the run measured all it was asked to, what it lacks.
func (r *backupReport) state() string {
	var missing []string
	for _, n := range r.opts.sizes {
		if !slices.Contains(r.measured, n) {
			missing = append(missing, "N="+thousands(n))
		}
	}
	rssMissing := r.opts.rssN > 0 && r.rssOnly() == nil
	if rssMissing {
		missing = append(missing, fmt.Sprintf("the operator's backup of N=%s alone (-rss-n)", thousands(r.opts.rssN)))
	}
	switch {
	case len(missing) == 0 && r.failure == nil:
		return ""
	case !r.finished:
		return fmt.Sprintf("**Partial: the run was still going when this page was written.** Not measured yet: %s.", joinWords(missing))
	case r.failure != nil:
		return fmt.Sprintf("**Partial: the run stopped before it measured %s** (%s). The figures below are those it measured before.",
			joinWords(missing), oneLine(r.failure.Error()))
	}
	return fmt.Sprintf("**Partial: not measured: %s.**", joinWords(missing))
}

// oneLine keeps the first line of an error, for the page.
func oneLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// page is docs/benchmarks-backup.md, whole.
func (r *backupReport) page() string {
	var b strings.Builder
	m := r.machine
	b.WriteString("# Benchmarks: backup and restore, move-operator against `clusterctl move --to-directory`\n\n")
	fmt.Fprintf(&b, "Written by `make bench-backup` (`test/bench -backup`) from one run on %s: %d cores, %s in all. "+
		"Do not edit by hand: run it again ([How to reproduce](#how-to-reproduce)).\n\n", m.date, m.cores, r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "`make bench-backup` backs up identical fleets of Cluster API workload clusters with clusterctl and with the operator, "+
		"restores each into another management cluster, and reports how long each backup and each restore took, how many objects "+
		"each held and how much memory the operator needed. This run measured %s.\n", r.sizeWords())
	if s := r.state(); s != "" {
		fmt.Fprintf(&b, "\n%s\n", s)
	}
	if s := r.narrowing(); s != "" {
		fmt.Fprintf(&b, "\n%s\n", s)
	}
	r.writeRun(&b)
	r.writeCompared(&b)
	b.WriteString(backupMeasured)
	b.WriteString("\n## Results\n")
	for _, t := range r.tables() {
		if len(t.rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n", t.title)
		writeTable(&b, t)
	}
	r.writeLarge(&b)
	r.writeFindings(&b)
	r.writeReproduce(&b)
	b.WriteString("\n## Known limits\n\n")
	b.WriteString(backupLimits)
	return b.String()
}

// sizeWords says the sizes and repetitions asked for.
func (r *backupReport) sizeWords() string {
	var parts []string
	for _, n := range r.opts.sizes {
		parts = append(parts, fmt.Sprintf("N=%s (%s)", thousands(n), plural(r.opts.repetitions(n), "repetition")))
	}
	s := joinWords(parts) + " workload clusters"
	if r.opts.rssN > 0 {
		s += fmt.Sprintf(", then the operator's backup alone at N=%s for its peak RSS", thousands(r.opts.rssN))
	}
	return s
}

// narrowing says, when the run set flags make bench-backup does not,
// what it set.
func (r *backupReport) narrowing() string {
	var set []string
	for _, f := range r.opts.flags {
		if f.set && f.name != "out" && f.name != "backup" {
			set = append(set, "-"+f.name+" "+quoteArg(f.value))
		}
	}
	if len(set) == 0 {
		return ""
	}
	return fmt.Sprintf("**Not the default run.** This run set %s; `make bench-backup` alone runs `-n %s -reps %s -rss-n %d`.",
		joinWords(quoted(set)), backupSizes, backupReps, largeSize)
}

func (r *backupReport) writeRun(b *strings.Builder) {
	m := r.machine
	b.WriteString("\n## The run\n\n")
	fmt.Fprintf(b, "- Command: %s\n", backupCommandWords(m, r.opts.args))
	fmt.Fprintf(b, "- Machine: %d cores (%s), %s memory, %s, %s\n", m.cores, m.cpuModel, gibibytes(m.memory), m.kernel, m.goVersion)
	fmt.Fprintf(b, "- Load average (1, 5, 15 minutes) before and after: %s / %s\n", m.loadBefore, m.loadAfter)
	fmt.Fprintf(b, "- Operator: %s; working tree at commit %s\n", m.operator, m.commit)
	fmt.Fprintf(b, "- Settings: %s\n", strings.Replace(m.settings, "operator and floors: ", "operator: ", 1))
	fmt.Fprintf(b, "- clusterctl: %s's Go library (`sigs.k8s.io/cluster-api/cmd/clusterctl/client`), in the bench's process, with the clusters' admin kubeconfigs\n", m.clusterAPI)
	fmt.Fprintf(b, "- Repetitions: %s; in each, the two backups one after the other, then the two restores, the order of the tools "+
		"rotating by one place per repetition\n", r.opts.plan())
	if dir := r.opts.heapProfileDir; dir != "" {
		fmt.Fprintf(b, "- The operator's heap at the peak of each backup and restore (`-heap-profile`): %s\n", dir)
	}
}

// backupCommandWords is the command of the run, as make bench-backup ran
// it when it did, and as bin/bench saw it.
func backupCommandWords(m machineInfo, args []string) string {
	direct := "`" + strings.Join(append([]string{"bin/bench"}, quoteArgs(args)...), " ") + "`"
	env := ""
	if len(m.env) > 0 {
		env = strings.Join(m.env, " ") + " "
	}
	if !m.viaMake {
		return "`" + env + direct[1:]
	}
	return fmt.Sprintf("`%s%s` (it runs %s)", env, makeBackupCommand(args), direct)
}

// makeBackupCommand is the make bench-backup command that runs bin/bench
// with args: -backup is the target's, -out BENCH_BACKUP_OUT, the rest
// BENCH_BACKUP_ARGS.
func makeBackupCommand(args []string) string {
	out := defaultBackupOut
	var rest []string
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || (name != "out" && name != "backup") {
			rest = append(rest, args[i])
			continue
		}
		if name == "backup" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		out = value
	}
	cmd := "make bench-backup"
	if out != defaultBackupOut {
		cmd += " BENCH_BACKUP_OUT=" + quoteArg(out)
	}
	if len(rest) > 0 {
		cmd += " BENCH_BACKUP_ARGS='" + strings.ReplaceAll(strings.Join(quoteArgs(rest), " "), "'", `'\''`) + "'"
	}
	return cmd
}

func (r *backupReport) writeCompared(b *strings.Builder) {
	b.WriteString("\n## What is compared\n\n")
	fmt.Fprintf(b, "- **clusterctl**: `clusterctl move --to-directory DIR --namespace NS` against the source (it refuses Clusters a user "+
		"paused, pauses the fleet's Clusters and ClusterClasses, writes every object as a JSON file, one at a time, Secrets in "+
		"clear text, then unpauses), and `clusterctl move --from-directory DIR` against the other cluster (it creates the objects "+
		"group by group, one at a time, owner references rebuilt, and unpauses), through clusterctl %s's Go library, every "+
		"provider running with its admission webhooks, as a user runs it.\n", r.machine.clusterAPI)
	b.WriteString("- **operator**: a MoveOperation in the source for the same namespace whose target is an archive " +
		"(`spec.target.archive.directory: {}`), **encrypted** to an age X25519 recipient given in a Secret " +
		"(`recipientsSecretRef`), as users back up by default, handled by the operator as installed in the source (see " +
		"[The run](#the-run)) with `--archive-directory`: validation, the source's providers stopped, the webhook bypass, the " +
		"archive written, the providers started again. Then a MoveOperation in the other cluster whose source is that archive " +
		"(`spec.source.archive`, `location` the base name of the backup's `status.archive.location`, the age identity in a Secret " +
		"named by `identitySecretRef`), handled by the operator installed there as in the source, its ServiceAccount also bound " +
		"to the ClusterRole `move-operator-target` of `dist/target-access.yaml`: validation, that cluster's providers stopped, " +
		"the objects created group by group with their statuses, the providers started again. Both operators are given the same " +
		"archive directory, as one volume would be.\n")
	b.WriteString("\nThe fleet: N workload clusters, each with 3 control-plane and 3 worker Machines and the project's full fixture " +
		"object set (package `test/fleet`: about 45 objects per cluster, a third of the clusters ClusterClass-based with their " +
		"class in another namespace, a cluster-scoped identity with its credentials Secret), one fleet per tool, created by the " +
		"bench with no controller running: what is timed is the tools alone. Each restore goes into the bench's second " +
		"management cluster, which has never held the fleet.\n")
}

const backupMeasured = `
## What is measured

A fresh pair of local management clusters per N (package ` + "`test/testenv`" + `: real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok processes, Cluster API installed as ` + "`clusterctl init`" + ` leaves it, its admission and conversion webhooks served by the bench process while each provider's Deployment has Ready pods). Each repetition creates one identical fleet per tool in the source, backs each up, then restores each into the second cluster.

- **Backup, restore**: wall time. clusterctl: its ` + "`Move`" + ` call. The operator: from creating the MoveOperation to seeing it ` + "`Done`" + ` through a watch (the operator already running and leading, as an installed operator is).
- **Checks**: after each backup the source's namespaces hold what they held before it, and the backup holds at least every object counted there and the fleet's cluster-scoped identity with its credentials Secret; after each restore the restored namespaces hold, kind by kind, what the source's held, and the identity and its Secret are there (a run fails, keeping every log, when one does not); the operator's archive must be encrypted.
- **Memory**: the operator's peak RSS (` + "`VmHWM`" + `), a fresh process for each backup and each restore, so each peak is that operation's; the operator runs with its Deployment's ` + "`GOMEMLIMIT`" + ` and ` + "`GOGC`" + `. Of that, the pages of its own binary (` + "`RssFile`" + ` at the end of the operation: its code and read-only data, resident however small the fleet) are reported apart in the last table: what grows with the fleet is the rest.
- **Ratios**: operator / clusterctl within a repetition, then the median over the repetitions.
`

// writeFindings states the figures of each size in words.
func (r *backupReport) writeFindings(b *strings.Builder) {
	var lines []string
	for _, n := range r.sizes() {
		if s := r.findings(n); s != "" {
			lines = append(lines, fmt.Sprintf("- **N=%s**: %s\n", thousands(n), s))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\n## What the figures say\n\n")
	b.WriteString(strings.Join(lines, ""))
}

// findings says, at n, how the operator's backup and restore compare with
// clusterctl's and what memory it took.
func (r *backupReport) findings(n int) string {
	var parts []string
	for _, op := range []string{opBackup, opRestore} {
		o, c := medianArchive(r.of(n, toolOperator, op), wallSeconds), medianArchive(r.of(n, toolClusterctl, op), wallSeconds)
		if math.IsNaN(o) || math.IsNaN(c) {
			continue
		}
		parts = append(parts, fmt.Sprintf("the operator's %s took %s against clusterctl's %s (%s)", op, secs(o), secs(c), times(r.ratio(n, op, wallSeconds))))
	}
	if rss := highestArchive(r.of(n, toolOperator, opBackup), archiveRSSMiB); !math.IsNaN(rss) {
		parts = append(parts, fmt.Sprintf("its peak RSS was %.0f MiB backing up", rss))
	}
	if rss := highestArchive(r.of(n, toolOperator, opRestore), archiveRSSMiB); !math.IsNaN(rss) {
		parts = append(parts, fmt.Sprintf("%.0f MiB restoring", rss))
	}
	if len(parts) == 0 {
		return ""
	}
	return joinWords(parts) + "."
}

// writeLarge says what the -rss-n backup showed, or why it is missing.
func (r *backupReport) writeLarge(b *strings.Builder) {
	b.WriteString("\n### The operator's backup at a thousand clusters\n\n")
	res := r.rssOnly()
	switch {
	case res != nil:
		fmt.Fprintf(b, "The operator backed up a fleet of N=%s (%s objects) alone, on a pair of clusters of its own, in %s, "+
			"with a peak RSS of %.0f MiB.\n", thousands(res.n), thousands(res.objects), secs(wallSeconds(res)), archiveRSSMiB(res))
	case r.opts.rssN == 0:
		fmt.Fprintf(b, "Not measured: this run left it out (`-rss-n 0`); `make bench-backup` backs up N=%s alone after the other sizes.\n", thousands(largeSize))
	case !r.finished:
		fmt.Fprintf(b, "Not measured yet: the run was still going when this page was written (N=%s comes last).\n", thousands(r.opts.rssN))
	default:
		fmt.Fprintf(b, "Not measured in this run: the run stopped before it (see above).\n")
	}
}

// reproduceCommand is the command that runs this page's run again.
func (r *backupReport) reproduceCommand() string {
	env := ""
	if len(r.machine.env) > 0 {
		env = strings.Join(r.machine.env, " ") + " "
	}
	if r.machine.viaMake {
		return env + makeBackupCommand(r.opts.args)
	}
	return env + "KUBEBUILDER_ASSETS=$(hack/kube-binaries.sh | tail -1) " + strings.Join(append([]string{"bin/bench"}, quoteArgs(r.opts.args)...), " ")
}

func (r *backupReport) writeReproduce(b *strings.Builder) {
	b.WriteString("\n## How to reproduce\n\n")
	fmt.Fprintf(b, "You need Go and a checkout; nothing else. This page's run:\n\n```sh\n%s\n```\n\n", r.reproduceCommand())
	fmt.Fprintf(b, "`make bench-backup` builds the Kubernetes binaries once (`hack/kube-binaries.sh`), builds `bin/bench` from "+
		"`test/bench`, takes the manager binary out of the image of the working tree (as `make bench` does), and writes the report "+
		"to the terminal and, whole, to `%s` (`BENCH_BACKUP_OUT`), after each fleet size too. Narrower runs:\n\n", defaultBackupOut)
	b.WriteString("```sh\nmake bench-backup BENCH_BACKUP_ARGS='-n 1 -rss-n 0'          # minutes\n")
	b.WriteString("make bench-backup BENCH_BACKUP_ARGS='-n 100 -rss-n 0'        # the N=100 targets only\n")
	b.WriteString("make bench-backup BENCH_BACKUP_ARGS='-n 1 -rss-n 1000'       # the peak RSS at N=1,000\n```\n")
}

const backupLimits = `- **Local clusters on shared cores.** Both management clusters, the bench (which runs clusterctl) and the operator share the machine's cores. Absolute times are this machine's; the ratios between the tools of the same repetition are what carries over.
- **What each tool does differs.** The operator stops the providers (scale to zero, and back) around a backup and around a restore, where clusterctl only pauses the Clusters; it encrypts its archive, where clusterctl writes Secrets in clear text; it restores statuses, which clusterctl drops. Each tool's time includes what it does.
- **No controller runs on the fleets.** Nothing reconciles the static fleets; the providers' Deployments exist and are scaled, their webhooks served. Pods become Ready at once (kwok): a provider's pod on a real node takes seconds, on the operator's path twice per operation (its providers stopped and started again), on none of clusterctl's.
- **Each backup holds both fleets' identities.** clusterctl's backup of one namespace holds every cluster-scoped object labelled ` + "`clusterctl.cluster.x-k8s.io/move-hierarchy`" + ` with its Secret, the other fleet's identity among them, and the operator's holds as many objects: 2 objects more than the fleet's own, of about 45 per cluster. The second restore of a repetition finds one identity and its Secret already there.
- **One archive directory.** Both operators read and write the same local directory, as one volume moved between clusters would be; a registry (` + "`spec.target.archive.oci`" + `) is not measured.
`
