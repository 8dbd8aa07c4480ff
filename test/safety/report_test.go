package main

import (
	"slices"
	"strings"
	"testing"
)

func TestTheReportCutsARunToItsFirstStepsAndCountsItsLateWrites(t *testing.T) {
	var sequence []string
	for i := range 11 {
		sequence = append(sequence, "14:04:2"+string(rune('0'+i%10))+".000 step")
	}
	sequence = append(sequence,
		lateWritePrefix+"14:04:23.725 cluster-api patch Machine ns/m/status (200)",
		lateWritePrefix+"14:04:24.676 control-plane-kubeadm patch KubeadmControlPlane ns/cp/status (200)",
		lateWritePrefix+"14:04:30.258 cluster-api patch ClusterResourceSetBinding ns/c (200)",
	)
	got := shortSequence(sequence)
	want := append(slices.Clone(sequence[:maxSequence]),
		"... and 3 more steps",
		"late writes: 3 (cluster-api 2, control-plane-kubeadm 1), from 14:04:23.725 to 14:04:30.258")
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if short := shortSequence(sequence[:3]); !slices.Equal(short, sequence[:3]) {
		t.Errorf("a short run without late writes is kept whole: %q", short)
	}
}

func TestTheTableShowsEachKindOfRunTheFiguresItMeasures(t *testing.T) {
	scenarios := []scenario{{id: "a", title: "baseline"}, drillScenario()}
	results := []result{
		{scenario: "a", mover: moverClusterctl, settled: true, copyDiffs: make([]copyDiff, 3)},
		{scenario: "i", mover: moverClusterctl, settled: true, drill: true, hostsProvisioned: 1, madeAgain: []string{"x", "y"}, nodesReplaced: 1},
	}
	var b strings.Builder
	writeTable(&b, results, scenarios)
	rows := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.HasPrefix(rows[len(rows)-2], "| a. baseline | clusterctl |") || !strings.HasSuffix(rows[len(rows)-2], "| 3 | 0 | n/a | n/a | yes |") {
		t.Errorf("a move's row measures its copies, not a drill's figures: %s", rows[len(rows)-2])
	}
	if !strings.HasSuffix(rows[len(rows)-1], "| 1 | n/a | n/a | 2 | 1 | yes |") {
		t.Errorf("a drill's row measures the machines made again and the Nodes replaced, not copies: %s", rows[len(rows)-1])
	}
	if !results[1].disturbed() || (result{scenario: "i", drill: true, settled: true, nodesReplaced: 1}).disturbed() == false {
		t.Error("a drill that replaced a Node disturbed the fleet")
	}
}
