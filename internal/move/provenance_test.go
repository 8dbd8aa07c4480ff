package move

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

func TestOnlyAnUnchangedCopyInTheSameTargetIsTakenAsAnEarlierCopy(t *testing.T) {
	object := func(uid types.UID, spec string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
			"metadata": map[string]any{"namespace": "classes", "name": "quick-start", "uid": string(uid)},
			"spec":     map[string]any{"infrastructure": map[string]any{"templateRef": spec}},
			"status":   map[string]any{"observedGeneration": int64(1)},
		}}
		return u
	}
	record := func(src, copied *unstructured.Unstructured, target types.UID) *unstructured.Unstructured {
		src = src.DeepCopy()
		src.SetAnnotations(map[string]string{movev1alpha1.CopiedToAnnotation: Provenance{Target: target, Copy: copied.GetUID(), Content: ContentHash(copied)}.String()})
		return src
	}
	src, copied := object("src-uid", "loop"), object("copy-uid", "loop")
	withStatus := copied.DeepCopy()
	withStatus.Object["status"] = map[string]any{"observedGeneration": int64(7)}

	for _, tc := range []struct {
		name     string
		src      *unstructured.Unstructured
		existing *unstructured.Unstructured
		target   types.UID
		want     bool
	}{
		{"the recorded copy, unchanged, in the recorded target is taken", record(src, copied, "tgt"), copied, "tgt", true},
		{"a status written by the target's controllers changes nothing", record(src, copied, "tgt"), withStatus, "tgt", true},
		{"an object never copied is a conflict", src, copied, "tgt", false},
		{"a copy changed in the target since is a conflict", record(src, copied, "tgt"), object("copy-uid", "changed"), "tgt", false},
		{"a source changed since is a conflict", record(object("src-uid", "changed"), copied, "tgt"), copied, "tgt", false},
		{"another object of that name is a conflict", record(src, copied, "tgt"), object("other-uid", "loop"), "tgt", false},
		{"a copy recorded for another target is a conflict", record(src, copied, "elsewhere"), copied, "tgt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsEarlierCopy(tc.src, tc.existing, tc.target); got != tc.want {
				t.Fatalf("IsEarlierCopy = %v, want %v", got, tc.want)
			}
		})
	}
}
