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
