package main

import (
	"slices"
	"testing"
	"time"
)

func TestEveryMoverTakesEveryPlaceOnceInAsManyRepetitionsAsMovers(t *testing.T) {
	all := movers{clusterctl: true, baseline: true}
	want := [][]string{
		{toolClusterctl, toolOperator, toolBaseline},
		{toolOperator, toolBaseline, toolClusterctl},
		{toolBaseline, toolClusterctl, toolOperator},
		{toolClusterctl, toolOperator, toolBaseline},
	}
	for rep := 1; rep <= len(want); rep++ {
		if got := moveOrder(rep, all); !slices.Equal(got, want[rep-1]) {
			t.Errorf("repetition %d: order %v, want %v", rep, got, want[rep-1])
		}
	}
}

func TestWithCarryTheOperatorsTwoMovesRotateWithTheOthers(t *testing.T) {
	all := movers{clusterctl: true, baseline: true, carry: true}
	want := [][]string{
		{toolClusterctl, toolOperator, toolOperatorCarry, toolBaseline},
		{toolOperator, toolOperatorCarry, toolBaseline, toolClusterctl},
		{toolOperatorCarry, toolBaseline, toolClusterctl, toolOperator},
		{toolBaseline, toolClusterctl, toolOperator, toolOperatorCarry},
		{toolClusterctl, toolOperator, toolOperatorCarry, toolBaseline},
	}
	for rep := 1; rep <= len(want); rep++ {
		if got := moveOrder(rep, all); !slices.Equal(got, want[rep-1]) {
			t.Errorf("repetition %d: order %v, want %v", rep, got, want[rep-1])
		}
	}
}

func TestTheOrderRotatesOnlyTheMoversThatRun(t *testing.T) {
	cases := []struct {
		name string
		m    movers
		rep  int
		want []string
	}{
		{"operator alone", movers{}, 2, []string{toolOperator}},
		{"no clusterctl", movers{baseline: true}, 2, []string{toolBaseline, toolOperator}},
		{"no baseline", movers{clusterctl: true}, 2, []string{toolOperator, toolClusterctl}},
		{"baseline first stays first", movers{clusterctl: true, baseline: true, baselineFirst: true}, 2, []string{toolBaseline, toolOperator, toolClusterctl}},
		{"the operator both ways moves Rebuild first in odd repetitions", movers{carry: true}, 1, []string{toolOperator, toolOperatorCarry}},
		{"the operator both ways moves Carry first in even repetitions", movers{carry: true}, 2, []string{toolOperatorCarry, toolOperator}},
		{"Carry rotates, the baseline stays first", movers{baseline: true, baselineFirst: true, carry: true}, 2, []string{toolBaseline, toolOperatorCarry, toolOperator}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := moveOrder(c.rep, c.m); !slices.Equal(got, c.want) {
				t.Errorf("repetition %d: order %v, want %v", c.rep, got, c.want)
			}
		})
	}
}

// Every mover's fleet has a namespace of the same length, so that the
// fleets' objects have the same sizes, and the same name as before -carry
// for the movers that had one.
func TestEveryMoverHasANamespacePrefixOfTheSameLength(t *testing.T) {
	for _, tool := range tools {
		if got := len(namespacePrefix[tool]); got != len(namespacePrefix[toolOperator]) {
			t.Errorf("%s: namespace prefix %q of length %d, want %d", tool, namespacePrefix[tool], got, len(namespacePrefix[toolOperator]))
		}
	}
}

// The files of a move (profiles) name its mover; the names of the movers
// that ran before -carry existed stay as docs/benchmarks.md gives them.
func TestTheMoversFilesNameThemWithoutSpacesOrCommas(t *testing.T) {
	want := map[string]string{
		toolClusterctl: "clusterctl", toolOperator: "operator", toolOperatorCarry: "operator-carry", toolBaseline: "baseline",
		toolParity: "parity-floor",
	}
	for tool, tag := range want {
		if got := fileTag(tool); got != tag {
			t.Errorf("%q: file tag %q, want %q", tool, got, tag)
		}
	}
}

func TestTheParityFloorRotatesWithTheOthersAfterTheBaseline(t *testing.T) {
	all := movers{clusterctl: true, baseline: true, parity: true}
	want := [][]string{
		{toolClusterctl, toolOperator, toolBaseline, toolParity},
		{toolOperator, toolBaseline, toolParity, toolClusterctl},
		{toolBaseline, toolParity, toolClusterctl, toolOperator},
		{toolParity, toolClusterctl, toolOperator, toolBaseline},
		{toolClusterctl, toolOperator, toolBaseline, toolParity},
	}
	for rep := 1; rep <= len(want); rep++ {
		if got := moveOrder(rep, all); !slices.Equal(got, want[rep-1]) {
			t.Errorf("repetition %d: order %v, want %v", rep, got, want[rep-1])
		}
	}
}

func TestTheParityFloorRunsWheneverTheBaselineDoesUnlessSkipped(t *testing.T) {
	cases := []struct {
		name string
		opts options
		rep  int
		want []string
	}{
		{"the default run", options{}, 1, []string{toolClusterctl, toolOperator, toolBaseline, toolParity}},
		{"-skip-parity", options{skipParity: true}, 1, []string{toolClusterctl, toolOperator, toolBaseline}},
		{"-skip-baseline takes the parity floor too", options{skipBaseline: true}, 1, []string{toolClusterctl, toolOperator}},
		{"-baseline-first keeps the baseline first and rotates the parity floor", options{baselineFirst: true}, 2,
			[]string{toolBaseline, toolOperator, toolParity, toolClusterctl}},
		{"-carry: the parity floor after the baseline", options{carry: true, skipClusterctl: true}, 1,
			[]string{toolOperator, toolOperatorCarry, toolBaseline, toolParity}},
		{"against the floors only", options{skipClusterctl: true}, 3, []string{toolParity, toolOperator, toolBaseline}},
		{"-parity-only leaves the baseline out", options{skipClusterctl: true, parityOnly: true}, 2, []string{toolParity, toolOperator}},
		{"-parity-only with -skip-parity leaves the operator alone", options{skipClusterctl: true, parityOnly: true, skipParity: true}, 1,
			[]string{toolOperator}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := moveOrder(c.rep, c.opts.movers()); !slices.Equal(got, c.want) {
				t.Errorf("repetition %d: order %v, want %v", c.rep, got, c.want)
			}
		})
	}
}

func TestAMoveMayTakeLongerTheLargerTheFleet(t *testing.T) {
	for _, c := range []struct {
		set  time.Duration
		n    int
		want time.Duration
	}{
		{0, 100, 45 * time.Minute},
		{0, 1000, 5000 * time.Second},
		{10 * time.Minute, 1000, 10 * time.Minute},
	} {
		if got := (options{moveTimeout: c.set}).moveTimeoutFor(c.n); got != c.want {
			t.Errorf("-move-timeout %s, N=%d: %s, want %s", c.set, c.n, got, c.want)
		}
	}
}

func TestTheReportSaysHowManyMoversRotated(t *testing.T) {
	cases := []struct {
		name string
		opts options
		want string
	}{
		{"the default run", options{}, "the order of the four movers rotating by one place per repetition"},
		{"with -carry", options{carry: true}, "the order of the five movers rotating by one place per repetition"},
		{"without the parity floor", options{skipParity: true}, "the order of the three movers rotating by one place per repetition"},
		{"the operator both ways alone", options{carry: true, skipClusterctl: true, skipBaseline: true}, "the order of the two movers rotating by one place per repetition"},
		{"the operator alone", options{skipClusterctl: true, skipBaseline: true}, "one mover per repetition"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := (&report{opts: c.opts}).rotation(); got != c.want {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
}
