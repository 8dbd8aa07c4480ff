package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// move is the move of a run's one repetition, with the figures the
// targets are made of.
func move(tool string, n int, whole, copyDelete time.Duration, rssMiB uint64) *result {
	return &result{
		tool: tool, n: n, rep: 1, objects: 45 * n,
		whole: whole, copyDelete: copyDelete, copy: copyDelete / 2, delete: copyDelete / 2,
		requests: map[string]requestCounts{"source": {"DELETE": float64(45 * n)}, "target": {"POST": float64(45 * n)}},
		peakRSS:  rssMiB << 20,
	}
}

// targetRows are the rows of the targets table by target name.
func targetRows(r *report) map[string][]string {
	out := map[string][]string{}
	for _, row := range r.targets().rows {
		out[row[0]] = row
	}
	return out
}

func TestTheTargetsAreCheckedAtTheSizesTheyName(t *testing.T) {
	s := time.Second
	r := newReport(options{sizes: []int{100, 1000}}, machineInfo{}, []*result{
		// N=100: copy+delete 120 s against the parity floor's 100 s (1.20×),
		// the whole move 150 s against clusterctl's 500 s (0.30×).
		move(toolOperator, 100, 150*s, 120*s, 100),
		move(toolParity, 100, 100*s, 100*s, 0),
		move(toolBaseline, 100, 70*s, 70*s, 0),
		move(toolClusterctl, 100, 500*s, 450*s, 0),
		// N=1,000: 1,500 s against 1,100 s (1.36×, 1.14× N=100's 1.20×),
		// peak RSS 130 MiB.
		move(toolOperator, 1000, 1800*s, 1500*s, 130),
		move(toolParity, 1000, 1100*s, 1100*s, 0),
	}, nil, time.Minute)
	rows := targetRows(r)
	for _, want := range [][]string{
		{"N=100: copy+delete within 1.3× of the parity floor's", "1.20×", "yes", "0.10× to spare"},
		{"N=100: whole move at most 0.25× clusterctl's", "0.30×", "no", "0.05× over (20 % above the target)"},
		{"N=1,000: copy+delete over the parity floor's at most 1.15× that ratio at N=100", "1.14×", "yes", "0.01× to spare"},
		{"N=1,000: peak RSS at most 120 MiB (highest repetition)", "130 MiB", "no", "10 MiB over (8 % above the target)"},
	} {
		if got := rows[want[0]]; !slices.Equal(got, want) {
			t.Errorf("target row\n%q\nwant\n%q", got, want)
		}
	}
	// The earlier targets the overhead targets replaced are gone; the others
	// stay, at the largest N.
	for name := range rows {
		if strings.Contains(name, "of the baseline") || strings.Contains(name, "at most 150 MiB") {
			t.Errorf("a replaced target is still checked: %q", name)
		}
	}
	if _, ok := rows["N=1000: CPU per moved object, all processes, at most 60 ms"]; !ok {
		t.Errorf("the CPU target at the largest N is missing: %v", r.targets().rows)
	}
}

func TestATargetOfASizeNotInTheRunIsNotMeasured(t *testing.T) {
	s := time.Second
	r := newReport(options{sizes: []int{10}}, machineInfo{}, []*result{
		move(toolOperator, 10, 30*s, 17*s, 76),
		move(toolParity, 10, 9*s, 9*s, 0),
	}, nil, time.Minute)
	rows := targetRows(r)
	for _, name := range []string{
		"N=100: copy+delete within 1.3× of the parity floor's",
		"N=100: whole move at most 0.25× clusterctl's",
		"N=1,000: copy+delete over the parity floor's at most 1.15× that ratio at N=100",
		"N=1,000: peak RSS at most 120 MiB (highest repetition)",
	} {
		if got, want := rows[name], []string{name, "-", "not measured in this run", ""}; !slices.Equal(got, want) {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// With -carry the parity floor writes every status, so the operator's move
// judged against it is the Carry one, which writes the same.
func TestWithCarryTheParityFloorIsTheCarryMovesFloor(t *testing.T) {
	s := time.Second
	r := newReport(options{sizes: []int{100}, carry: true}, machineInfo{}, []*result{
		move(toolOperator, 100, 150*s, 100*s, 100),
		move(toolOperatorCarry, 100, 170*s, 140*s, 100),
		move(toolParity, 100, 100*s, 100*s, 0),
	}, nil, time.Minute)
	if got := targetRows(r)["N=100: copy+delete within 1.3× of the parity floor's"][1]; got != "1.40×" {
		t.Errorf("copy+delete over the parity floor's: %s, want the Carry move's 1.40×", got)
	}
	if !slices.ContainsFunc(r.summary().rows, func(row []string) bool {
		return row[1] == "operator, Carry / parity floor" && row[4] == "1.40×"
	}) {
		t.Errorf("the summary has no ratio of the Carry move to the parity floor:\n%v", r.summary().rows)
	}
}

func TestTheReportGivesTheParityFloorARowWhereverTheBaselineHasOne(t *testing.T) {
	s := time.Second
	r := newReport(options{sizes: []int{10}, skipClusterctl: true}, machineInfo{}, []*result{
		move(toolOperator, 10, 30*s, 18*s, 76),
		move(toolBaseline, 10, 7*s, 7*s, 0),
		move(toolParity, 10, 9*s, 9*s, 0),
	}, nil, time.Minute)
	for _, tb := range r.tables() {
		hasBaseline := slices.ContainsFunc(tb.rows, func(row []string) bool { return slices.Contains(row, toolBaseline) })
		hasParity := slices.ContainsFunc(tb.rows, func(row []string) bool { return slices.Contains(row, toolParity) })
		if hasBaseline != hasParity {
			t.Errorf("table %q: a baseline row %v, a parity floor row %v", tb.title, hasBaseline, hasParity)
		}
	}
	if !slices.ContainsFunc(r.summary().rows, func(row []string) bool {
		return row[1] == "operator / parity floor" && row[4] == "2.00×"
	}) {
		t.Errorf("the summary has no ratio of the operator's copy+delete to the parity floor's:\n%v", r.summary().rows)
	}
	if text := r.text(); !strings.Contains(text, "Parity floor: the baseline's requests") {
		t.Errorf("the preamble does not say what the parity floor does:\n%s", text)
	}
}
