package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// operatorMove is a result of one of the operator's moves with the figures
// Carry's cost is made of.
func operatorMove(tool string, rep int, whole, copying time.Duration, requests, ownTargetPatches float64) *result {
	return &result{
		tool: tool, n: 10, rep: rep, objects: 400,
		whole: whole, copy: copying, copyDelete: copying + 5*time.Second, delete: 5 * time.Second,
		requests: map[string]requestCounts{"source": {"DELETE": requests / 2}, "target": {"POST": requests / 2}},
		clientRequests: map[string]requestCounts{
			"source": {"DELETE": 400},
			"target": {"POST": 400, "PATCH": ownTargetPatches},
		},
		peakRSS: 80 << 20,
		phases:  []phaseSpan{{phase: "Copying", duration: copying}, {phase: "Deleting", duration: 5 * time.Second}},
	}
}

// carryRun is a run with -carry at N=10: two repetitions with both moves,
// and a third in which only the Rebuild move was measured, which has no
// pair and must not count.
func carryRun() *report {
	return newReport(options{sizes: []int{10}, carry: true}, machineInfo{}, []*result{
		operatorMove(toolOperator, 1, 40*time.Second, 16*time.Second, 2000, 500),
		operatorMove(toolOperatorCarry, 1, 40*time.Second, 20*time.Second, 2360, 840),
		operatorMove(toolOperatorCarry, 2, 60*time.Second, 28*time.Second, 2368, 848),
		operatorMove(toolOperator, 2, 40*time.Second, 16*time.Second, 2000, 500),
		operatorMove(toolOperator, 3, 10*time.Second, 1*time.Second, 100, 0),
	}, nil, time.Minute)
}

func TestCarrysCostIsTheMedianOfEachRepetitionsPair(t *testing.T) {
	costs := carryRun().carryCosts()
	if len(costs) != 1 {
		t.Fatalf("%d cost lines, want 1 (N=10): %+v", len(costs), costs)
	}
	c := costs[0]
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"repetitions paired", float64(c.pairs), 2},
		// 40/40 and 60/40.
		{"whole move, Carry over Rebuild", c.whole, 1.25},
		// 20/16 and 28/16.
		{"Copying, Carry over Rebuild", c.copying, 1.5},
		// (2360-2000)/400 and (2368-2000)/400.
		{"extra requests per moved object", c.requestsPerObject, 0.91},
		// (840-500)/400 and (848-500)/400.
		{"extra PATCHes to the target per moved object", c.patchesPerObject, 0.86},
	} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", f.name, f.got, f.want)
		}
	}
	want := "the whole move takes 1.25× the Rebuild move's (Copying 1.50×); +0.91 requests per moved object on both API servers " +
		"(background included), +0.86 PATCHes per moved object from the operator to the target by its own count (the status writes); " +
		"medians over 2 repetitions"
	if got := c.text(); !strings.HasPrefix(got, want) {
		t.Errorf("the cost line says\n%s\nwant it to start with\n%s", got, want)
	}
}

func TestTheReportStatesCarrysCostAndGivesItsMoveARowWhereverTheOperatorHasOne(t *testing.T) {
	r := carryRun()
	text := r.text()
	if !strings.Contains(text, "\nCarry's cost at N=10: the whole move takes 1.25×") {
		t.Errorf("the text report does not state Carry's cost:\n%s", text)
	}
	if md := r.page(); !strings.Contains(md, "\n- **Carry's cost at N=10**: the whole move takes 1.25×") {
		t.Errorf("the Markdown report does not state Carry's cost:\n%s", md)
	}
	for _, tb := range r.tables() {
		if tb.title == "The targets for the operator" {
			continue
		}
		carried := slices.ContainsFunc(tb.rows, func(row []string) bool { return slices.Contains(row, toolOperatorCarry) })
		if !carried {
			t.Errorf("table %q has no row for %q:\n%v", tb.title, toolOperatorCarry, tb.rows)
		}
	}
	summary := r.summary()
	if !slices.ContainsFunc(summary.rows, func(row []string) bool {
		return slices.Equal(row[:4], []string{"10", "operator, Carry / operator", "", "1.25×"})
	}) {
		t.Errorf("the summary has no row of Carry's ratios to the Rebuild move:\n%v", summary.rows)
	}
	verbs := r.verbs()
	if !slices.ContainsFunc(verbs.rows, func(row []string) bool { return row[1] == "operator, Carry's own count" }) {
		t.Errorf("the requests by verb have no row of the Carry operator's own count:\n%v", verbs.rows)
	}
	phases := r.phases()
	if want := []string{"N", "mover", "Copying", "Deleting", "whole move"}; !slices.Equal(phases.header, want) {
		t.Errorf("the phases' header is %v, want %v", phases.header, want)
	}
}

// Without -carry the report is the one it always was: no cost line, no
// mover column in the phases, no ratio of Carry.
func TestWithoutCarryTheReportHasNothingOfIt(t *testing.T) {
	r := newReport(options{sizes: []int{10}}, machineInfo{}, []*result{
		operatorMove(toolOperator, 1, 40*time.Second, 16*time.Second, 2000, 500),
	}, nil, time.Minute)
	if costs := r.carryCosts(); len(costs) != 0 {
		t.Errorf("a cost of Carry without its move: %+v", costs)
	}
	if text := r.text(); strings.Contains(text, "Carry") {
		t.Errorf("the report mentions Carry without -carry:\n%s", text)
	}
	if want := []string{"N", "Copying", "Deleting", "whole move"}; !slices.Equal(r.phases().header, want) {
		t.Errorf("the phases' header is %v, want %v", r.phases().header, want)
	}
}
