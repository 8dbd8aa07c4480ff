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
	}
	for _, c := range cases {
		if got := moveOrder(c.rep, c.m); !slices.Equal(got, c.want) {
			t.Errorf("%s, repetition %d: order %v, want %v", c.name, c.rep, got, c.want)
		}
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
