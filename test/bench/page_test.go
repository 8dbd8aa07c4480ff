package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// narrowedRun is a run of make bench BENCH_ARGS='-n 1,10 -reps 1': every
// mover once at each size.
func narrowedRun(t *testing.T) *report {
	t.Helper()
	opts, err := parseOptions([]string{"-out", "docs/benchmarks.md", "-n", "1,10", "-reps", "1"})
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	var results []*result
	for _, n := range []int{1, 10} {
		d := time.Duration(n)
		for i, res := range []*result{
			move(toolClusterctl, n, 4*s+d*3*s, 3*s+d*3*s, 0),
			move(toolOperator, n, 4*s+d*s, s+d*s, 70),
			move(toolBaseline, n, d*s/2, d*s/2, 0),
			move(toolParity, n, d*s*3/4, d*s*3/4, 0),
		} {
			res.position = i + 1
			res.phases = []phaseSpan{{"Validating", s / 2}, {"Copying", d * s / 2}, {"Deleting", d * s / 2}}
			results = append(results, res)
		}
	}
	m := machineInfo{date: "2026-12-05 10:00 UTC", cores: 2, cpuModel: "a CPU", memory: "24683748 kB", kernel: "Linux 6", goVersion: "go1.26",
		commit: "abc1234", settings: "operator and floors: QPS 500", loadBefore: "0.50 0.40 0.30", loadAfter: "3.10 2.00 1.00",
		operator: "the manager binary", viaMake: true, clusterAPI: "v1.14.2"}
	return newReport(opts, m, results, map[int]map[string]float64{1: {"source": 0.5, "target": 0.4}}, 30*time.Minute)
}

func TestThePageStatesTheCommandOfItsRunAndThatItIsNarrowed(t *testing.T) {
	page := narrowedRun(t).page()
	if os.Getenv("BENCH_PAGE") != "" {
		_ = os.WriteFile(os.Getenv("BENCH_PAGE"), []byte(page), 0o644)
	}
	for _, want := range []string{
		"- Command: `make bench BENCH_ARGS='-n 1,10 -reps 1'` (it runs `bin/bench -out docs/benchmarks.md -n 1,10 -reps 1`)",
		"- Machine: 2 cores (a CPU), 23.5 GiB memory",
		"**Not the default run.** This run set `-n 1,10` and `-reps 1`",
		"`make bench` alone runs `-n 10,50,100 -reps 3,100=2`",
		"```sh\nmake bench BENCH_ARGS='-n 1,10 -reps 1'\n```",
		"| `-reps` | `1` | `3,100=2` |",
		"| `-carry` | default | `false` |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}

func TestThePageHasEverySectionAndNoHistory(t *testing.T) {
	page := narrowedRun(t).page()
	var headings []string
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "## ") {
			headings = append(headings, strings.TrimPrefix(line, "## "))
		}
	}
	want := []string{"The run", "What is compared", "What is measured", "Results", "What the figures mean", "How to reproduce", "Known limits"}
	if !slices.Equal(headings, want) {
		t.Errorf("sections %q, want %q", headings, want)
	}
	// Verdicts, issue numbers and dates of earlier runs belong in git,
	// not on a page that one run writes.
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)not met`), regexp.MustCompile(`(?i)\bbefore\b.*\bnow\b`), regexp.MustCompile(`(?i)issue #?\d`),
		regexp.MustCompile(`\B#\d+`), regexp.MustCompile(`\| met \|`), regexp.MustCompile(`spec\.status\b`),
	} {
		if loc := bad.FindStringIndex(page); loc != nil {
			t.Errorf("the page says %q", page[max(0, loc[0]-40):min(len(page), loc[1]+40)])
		}
	}
}

func TestThePageSaysWhatTheFiguresMean(t *testing.T) {
	page := narrowedRun(t).page()
	for _, want := range []string{
		// N=10: 14 s against 34 s, copy+delete 11 s against the parity
		// floor's 7.5 s.
		"- **N=10** (450 objects): The operator's whole move took 14.0 s, clusterctl's 34.0 s (0.41×)",
		"The operator's copy+delete took 1.47× the parity floor's (11.0 s against 7.5 s) and 2.20× the baseline's.",
		"- **One repetition.**",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}

func TestMakeBenchIsTheCommandThatRanBinBench(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-out", "docs/benchmarks.md"}, "make bench"},
		{[]string{"-out=docs/benchmarks.md", "-n", "1"}, "make bench BENCH_ARGS='-n 1'"},
		{[]string{"-out", "/tmp/b.md", "-operator-flags", "--zap-log-level=debug --x"}, `make bench BENCH_OUT=/tmp/b.md BENCH_ARGS='-operator-flags "--zap-log-level=debug --x"'`},
	} {
		if got := makeCommand(c.args); got != c.want {
			t.Errorf("bin/bench %q: %s, want %s", c.args, got, c.want)
		}
	}
}

// A floor makes the operator's writes and nothing more: when it took
// longer, the machine slowed it, and the page says so beside the ratio.
func TestAFloorSlowerThanTheOperatorIsNotTakenForItsOverhead(t *testing.T) {
	s := time.Second
	op, parity := move(toolOperator, 100, 380*s, 310*s, 74), move(toolParity, 100, 360*s, 360*s, 0)
	op.cpu = cpuSample{"operator": 285 * s}
	parity.cpu = cpuSample{"bench process": 216 * s}
	r := newReport(options{sizes: []int{100}}, machineInfo{}, []*result{op, parity}, nil, time.Hour)
	got := r.findings(100)
	for _, want := range []string{
		"The operator's copy+delete took 0.86× the parity floor's (310.0 s against 360.0 s).",
		"the machine's other load left its processes 0.60 cores busy against 0.75 for the operator's move",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the findings do not say %q:\n%s", want, got)
		}
	}
	if fast := narrowedRun(t).findings(10); strings.Contains(fast, "slower than the move it bounds") {
		t.Errorf("a floor faster than the operator is said to be slowed:\n%s", fast)
	}
}

func TestTheOperatorsMemoryLimitIsGivenInMiB(t *testing.T) {
	if got := bytesWords("268435456"); got != "268435456 (256 MiB)" {
		t.Errorf("bytesWords: %q", got)
	}
	if got := bytesWords("200Mi"); got != "200Mi" {
		t.Errorf("a value that is not a count of bytes is kept: %q", got)
	}
}

// The API's documentation of spec.objectStatusPolicy sends readers to the
// page for what Carry costs: the section is there in every run, with the
// cost when the run measured it and how to measure it when not.
func TestThePageAlwaysSaysWhatCarryingTheStatusCosts(t *testing.T) {
	without := narrowedRun(t).page()
	if !strings.Contains(without, "\n### Carrying the status\n") || !strings.Contains(without, "This run did not measure it: `-carry`") {
		t.Errorf("a run without -carry does not say how to measure Carry's cost:\n%s", without)
	}
	with := carryRun().page()
	if !strings.Contains(with, "Its cost in this run, against the default move (Rebuild) of the same repetition:\n\n- **Carry's cost at N=10**") {
		t.Errorf("a run with -carry does not state Carry's cost:\n%s", with)
	}
	if !strings.Contains(without, "`-reps 4` (with 4 movers)") {
		t.Errorf("the page does not give the repetitions that put every mover in every place:\n%s", without)
	}
}
