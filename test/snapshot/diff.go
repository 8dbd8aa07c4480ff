package snapshot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Diff describes how got differs from want, or returns "" when they are
// equal and got is sound: objects only in want (-), only in got (+), for
// objects in both a field-by-field diff (-want +got), and every UID of got
// that names nothing in its cluster (!), even when want has it too.
func Diff(want, got *Snapshot) string {
	var b strings.Builder
	i, j := 0, 0
	for i < len(want.Objects) || j < len(got.Objects) {
		switch {
		case j >= len(got.Objects) || (i < len(want.Objects) && less(want.Objects[i].Key(), got.Objects[j].Key())):
			fmt.Fprintf(&b, "- %s: missing\n", want.Objects[i].Key())
			i++
		case i >= len(want.Objects) || less(got.Objects[j].Key(), want.Objects[i].Key()):
			fmt.Fprintf(&b, "+ %s: unexpected\n", got.Objects[j].Key())
			j++
		default:
			if d := cmp.Diff(want.Objects[i], got.Objects[j]); d != "" {
				fmt.Fprintf(&b, "~ %s differs (-want +got):\n%s", want.Objects[i].Key(), indent(d))
			}
			i++
			j++
		}
	}
	for _, o := range got.Objects {
		for _, u := range o.Unresolved {
			fmt.Fprintf(&b, "! %s: %s\n", o.Key(), u)
		}
	}
	return b.String()
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// PausedOnce leaves out of a copy of s the generations the Clusters'
// statuses observed. A move's or a backup's pause is a change of spec
// (spec.paused), so the copied or archived Clusters' statuses observed the
// generation before it; a copy made from them is a new object, whose
// status observed none of its generations and says so by leaving
// observedGeneration out (see move's mapping of generations), where the
// source's resumed Cluster still names the older one. Both mean the same
// to a controller: not reconciled since the pause.
func PausedOnce(s *Snapshot) *Snapshot {
	out := &Snapshot{Objects: slices.Clone(s.Objects)}
	for i, o := range out.Objects {
		if o.Kind != "Cluster.cluster.x-k8s.io" {
			continue
		}
		status, _ := runtime.DeepCopyJSONValue(o.Status).(map[string]any)
		delete(status, "observedGeneration")
		conditions, _, _ := unstructured.NestedSlice(status, "conditions")
		for _, c := range conditions {
			delete(c.(map[string]any), "observedGeneration")
		}
		if conditions != nil {
			_ = unstructured.SetNestedSlice(status, conditions, "conditions")
		}
		out.Objects[i].Status = status
	}
	return out
}
