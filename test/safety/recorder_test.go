package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func machine(rv string, replicas int64, managers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
	u.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	u.SetKind("MachineSet")
	u.SetNamespace("ns")
	u.SetName("ms")
	u.SetResourceVersion(rv)
	var entries []metav1.ManagedFieldsEntry
	for _, m := range managers {
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cluster.x-k8s.io/v1beta2",
			Time: &metav1.Time{Time: time.Unix(0, 0)}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)})
	}
	u.SetManagedFields(entries)
	return u
}

func TestRecorderTakesTheCopyAsTheMoverMadeIt(t *testing.T) {
	everything := func(string, string) bool { return true }
	original := machine("10", 1, "capi-machinedeployment")

	t.Run("a copy whose managed fields the mover restores in its own write matches its original", func(t *testing.T) {
		g := NewWithT(t)
		r := newRecorder(everything)
		r.recordSource(watch.Event{Type: watch.Added, Object: original})
		r.recordTarget(watch.Event{Type: watch.Added, Object: machine("1", 1)})
		withStatus := machine("2", 1)
		withStatus.Object["status"] = map[string]any{"replicas": int64(1)}
		r.recordTarget(watch.Event{Type: watch.Modified, Object: withStatus})
		restored := withStatus.DeepCopy()
		restored.SetResourceVersion("3")
		restored.SetManagedFields(original.GetManagedFields())
		r.recordTarget(watch.Event{Type: watch.Modified, Object: restored})
		g.Expect(r.differences(time.Now())).To(BeEmpty())
	})
	t.Run("a copy created without its managed fields, never restored, differs", func(t *testing.T) {
		g := NewWithT(t)
		r := newRecorder(everything)
		r.recordSource(watch.Event{Type: watch.Added, Object: original})
		r.recordTarget(watch.Event{Type: watch.Added, Object: machine("1", 1)})
		g.Expect(r.differences(time.Now())).To(HaveLen(1))
	})
	t.Run("a controller's later write, which changes fields, is not the mover's copy", func(t *testing.T) {
		g := NewWithT(t)
		r := newRecorder(everything)
		r.recordSource(watch.Event{Type: watch.Added, Object: original})
		r.recordTarget(watch.Event{Type: watch.Added, Object: machine("1", 2, "capi-machinedeployment")})
		r.recordTarget(watch.Event{Type: watch.Modified, Object: machine("2", 1, "capi-machinedeployment", "other")})
		d := r.differences(time.Now())
		g.Expect(d).To(HaveLen(1))
		g.Expect(d[0].Diff).To(ContainSubstring("replicas"))
	})
	t.Run("a write that changes only managed fields after the mover was done is a controller's, not the copy", func(t *testing.T) {
		g := NewWithT(t)
		r := newRecorder(everything)
		r.recordSource(watch.Event{Type: watch.Added, Object: original})
		r.recordTarget(watch.Event{Type: watch.Added, Object: machine("1", 1)})
		done := time.Now()
		r.recordTarget(watch.Event{Type: watch.Modified, Object: machine("2", 1, "capi-machinedeployment")})
		g.Expect(r.differences(done)).To(HaveLen(1))
	})
}
