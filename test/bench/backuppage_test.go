package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// backupRunOf is a report of make bench-backup run with args, holding
// results.
func backupRunOf(t *testing.T, args []string, results []*archiveResult, measured []int, finished bool, failure error) *backupReport {
	t.Helper()
	opts, err := parseOptions(append([]string{"-backup", "-out", defaultBackupOut}, args...))
	if err != nil {
		t.Fatal(err)
	}
	m := machineInfo{date: "2026-12-06 01:00 UTC", cores: 2, cpuModel: "a CPU", memory: "24683748 kB", kernel: "Linux 6", goVersion: "go1.26",
		commit: "abc1234", settings: "operator and floors: QPS 500", loadBefore: "0.50 0.40 0.30", loadAfter: "3.10 2.00 1.00",
		operator: "the manager binary", viaMake: true, clusterAPI: "v1.14.2"}
	return &backupReport{opts: opts, machine: m, results: results, measured: measured, finished: finished, failure: failure, elapsed: time.Hour}
}

// archiveOp is one backup or restore taking secs seconds.
func archiveOp(tool, op string, n, rep int, secs float64, rssMiB uint64) *archiveResult {
	return &archiveResult{tool: tool, op: op, n: n, rep: rep, objects: 45 * n, bytes: 1024 * int64(n),
		wall: time.Duration(secs * float64(time.Second)), peakRSS: rssMiB << 20}
}

// bothTools is one repetition at n: clusterctl takes ctl seconds for each
// operation, the operator opr.
func bothTools(n, rep int, ctl, opr float64, rssMiB uint64) []*archiveResult {
	return []*archiveResult{
		archiveOp(toolClusterctl, opBackup, n, rep, ctl, 0),
		archiveOp(toolOperator, opBackup, n, rep, opr, rssMiB),
		archiveOp(toolClusterctl, opRestore, n, rep, ctl, 0),
		archiveOp(toolOperator, opRestore, n, rep, opr, rssMiB),
	}
}

func row(t *testing.T, tb table, first ...string) []string {
	t.Helper()
	for _, r := range tb.rows {
		if slices.Equal(r[:len(first)], first) {
			return r
		}
	}
	t.Fatalf("%s has no row %q: %q", tb.title, first, tb.rows)
	return nil
}

func TestWithoutFlagsBackupRunsMakeBenchBackupsSizesOnce(t *testing.T) {
	opts, err := parseOptions([]string{"-backup"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opts.sizes, []int{1, 30, 100}) || opts.reps != 1 || opts.rssN != 1000 {
		t.Errorf("-backup alone runs sizes %v, %d repetitions, -rss-n %d; want [1 30 100], 1, 1000", opts.sizes, opts.reps, opts.rssN)
	}
	opts, err = parseOptions([]string{"-backup", "-n", "5", "-reps", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opts.sizes, []int{5}) || opts.reps != 2 {
		t.Errorf("-backup -n 5 -reps 2 runs sizes %v, %d repetitions", opts.sizes, opts.reps)
	}
	if _, err := parseOptions([]string{"-backup", "-rss-n", "-1"}); err == nil {
		t.Error("-rss-n -1 is taken")
	}
}

func TestTheRatiosAreTheOperatorsTimeOverClusterctlsOfTheSameRepetition(t *testing.T) {
	var results []*archiveResult
	results = append(results, bothTools(100, 1, 40, 8, 70)...)
	results = append(results, bothTools(100, 2, 40, 12, 70)...)
	results = append(results, bothTools(100, 3, 10, 6, 70)...)
	r := backupRunOf(t, []string{"-n", "100", "-reps", "3", "-rss-n", "0"}, results, []int{100}, true, nil)
	// 8/40, 12/40, 6/10: the median is 0.3, not the medians' ratio 8/40.
	if got := r.ratio(100, opBackup, wallSeconds); got < 0.2999 || got > 0.3001 {
		t.Errorf("the backup's ratio is %.4f, want 0.30", got)
	}
	s := r.summary()
	ratios := row(t, s, "100", "operator / clusterctl")
	if ratios[2] != "0.30×" || ratios[3] != "0.30×" {
		t.Errorf("the ratio row is %q, want 0.30× for the backup and the restore", ratios)
	}
	opr := row(t, s, "100", toolOperator)
	if opr[2] != "8.0" || opr[7] != "70" || opr[8] != "70" {
		t.Errorf("the operator's row is %q: want its median backup 8.0 s and its peak RSS 70 MiB for both", opr)
	}
	if ctl := row(t, s, "100", toolClusterctl); ctl[7] != "" {
		t.Errorf("clusterctl's row gives a peak RSS: %q", ctl)
	}
}

func TestTheTargetsAreMetOrNotAtTheSizesTheyNameAndNeverAssumed(t *testing.T) {
	results := bothTools(100, 1, 40, 8, 70) // 0.20×: met
	results[3].wall = 20 * time.Second      // the operator's restore: 0.50×, not met
	rss := archiveOp(toolOperator, opBackup, 1000, 1, 300, 130)
	rss.rssOnly = true
	results = append(results, rss)
	r := backupRunOf(t, nil, results, []int{100}, true, nil)
	tg := r.targets()
	for _, want := range [][]string{
		{"N=100: backup at most 0.25× clusterctl's (--to-directory)", "0.20×", "yes", "0.05× to spare"},
		{"N=100: restore at most 0.25× clusterctl's (--from-directory)", "0.50×", "no", "0.25× over (100 % above the target)"},
		{"N=1,000: peak RSS of the operator's backup at most 120 MiB", "130 MiB", "no", "10 MiB over (8 % above the target)"},
	} {
		if got := row(t, tg, want[0]); !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	}

	r = backupRunOf(t, []string{"-n", "1", "-rss-n", "0"}, bothTools(1, 1, 1, 2, 60), []int{1}, true, nil)
	for _, got := range r.targets().rows {
		if got[2] != "not measured in this run" {
			t.Errorf("a run of N=1 alone judges %q", got)
		}
	}
}

func TestAPageWrittenBeforeTheEndSaysWhatItLacks(t *testing.T) {
	results := bothTools(1, 1, 1, 2, 60)
	during := backupRunOf(t, []string{"-n", "1,30"}, results, []int{1}, false, nil).page()
	if !strings.Contains(during, "**Partial: the run was still going when this page was written.** Not measured yet: N=30 and "+
		"the operator's backup of N=1,000 alone (-rss-n).") {
		t.Errorf("a page written between sizes does not say what is to come:\n%s", during)
	}
	stopped := backupRunOf(t, []string{"-n", "1,30"}, results, []int{1}, true, errors.New("fleets of 30 clusters: interrupted\nmore")).page()
	if !strings.Contains(stopped, "**Partial: the run stopped before it measured N=30 and the operator's backup of N=1,000 alone "+
		"(-rss-n)** (fleets of 30 clusters: interrupted).") {
		t.Errorf("a page of a run that stopped does not say so:\n%s", stopped)
	}
	if !strings.Contains(stopped, "Not measured in this run: the run stopped before it") {
		t.Error("the page does not say the N=1,000 backup was not reached")
	}
	if !strings.Contains(during, "Not measured yet: the run was still going when this page was written (N=1,000 comes last).") {
		t.Error("a page written between sizes does not say the N=1,000 backup is to come")
	}
	whole := backupRunOf(t, []string{"-n", "1", "-rss-n", "0"}, results, []int{1}, true, nil).page()
	if strings.Contains(whole, "Partial") {
		t.Error("a run that measured all it was asked calls itself partial")
	}
}

func TestThePageStatesMakeBenchBackupsCommand(t *testing.T) {
	r := backupRunOf(t, []string{"-n", "1", "-rss-n", "0"}, bothTools(1, 1, 1, 2, 60), []int{1}, true, nil)
	page := r.page()
	for _, want := range []string{
		"- Command: `make bench-backup BENCH_BACKUP_ARGS='-n 1 -rss-n 0'` (it runs `bin/bench -backup -out docs/benchmarks-backup.md -n 1 -rss-n 0`)",
		"**Not the default run.** This run set `-n 1` and `-rss-n 0`; `make bench-backup` alone runs `-n 1,30,100 -reps 1 -rss-n 1000`.",
		"- Settings: operator: QPS 500",
		"| 1 | operator / clusterctl | 2.00× | 2.00× | 1.00× | 1.00× | 1.00× |  |  |",
		"- **N=1**: the operator's backup took 2.0 s against clusterctl's 1.0 s (2.00×), the operator's restore took 2.0 s " +
			"against clusterctl's 1.0 s (2.00×), its peak RSS was 60 MiB backing up and 60 MiB restoring.",
		"Not measured: this run left it out (`-rss-n 0`)",
		"This page's run:\n\n```sh\nmake bench-backup BENCH_BACKUP_ARGS='-n 1 -rss-n 0'\n```",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	if os.Getenv("BENCH_PAGE") != "" {
		_ = os.WriteFile(filepath.Join(os.Getenv("BENCH_PAGE")), []byte(page), 0o644)
	}
}

func TestMakeBenchBackupIsTheCommandThatRanBinBench(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-backup", "-out", "docs/benchmarks-backup.md"}, "make bench-backup"},
		{[]string{"-backup", "-out", "docs/benchmarks-backup.md", "-n", "1", "-rss-n", "0"}, "make bench-backup BENCH_BACKUP_ARGS='-n 1 -rss-n 0'"},
		{[]string{"-backup", "-out=/tmp/b.md", "-operator-flags", "--zap-log-level=debug -v"},
			`make bench-backup BENCH_BACKUP_OUT=/tmp/b.md BENCH_BACKUP_ARGS='-operator-flags "--zap-log-level=debug -v"'`},
	} {
		if got := makeBackupCommand(c.args); got != c.want {
			t.Errorf("makeBackupCommand(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}

func TestClusterctlsBackupIsCountedOneFilePerObject(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"Cluster_ns_a": "{}", "Secret_ns_a-kubeconfig": "{\"a\":1}"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "not-an-object"), 0o700); err != nil {
		t.Fatal(err)
	}
	files, size, err := directoryFiles(dir)
	if err != nil || files != 2 || size != 9 {
		t.Errorf("directoryFiles = %d files, %d bytes, %v; want 2 files, 9 bytes", files, size, err)
	}
}
