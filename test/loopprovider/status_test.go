package loopprovider

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestSetCondition(t *testing.T) {
	old := []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "observedGeneration": int64(1), "lastTransitionTime": "2026-01-01T00:00:00Z"},
		map[string]any{"type": "Other", "status": "False", "reason": "X", "lastTransitionTime": "2026-01-01T00:00:00Z"},
	}
	t.Run("an unchanged status keeps its transition time, so nothing is written", func(t *testing.T) {
		g := NewWithT(t)
		got := setReady(old, ready(), 1)
		g.Expect(got).To(Equal(old))
	})
	t.Run("a changed status gets a new transition time and message", func(t *testing.T) {
		g := NewWithT(t)
		got := setReady(old, isFalse(PoweredOffReason, "off"), 2)
		ready := got[0].(map[string]any)
		g.Expect(ready).To(HaveKeyWithValue("status", "False"))
		g.Expect(ready).To(HaveKeyWithValue("message", "off"))
		g.Expect(ready).To(HaveKeyWithValue("observedGeneration", int64(2)))
		g.Expect(ready["lastTransitionTime"]).NotTo(Equal("2026-01-01T00:00:00Z"))
		g.Expect(got[1]).To(Equal(old[1]), "other conditions are left alone")
	})
	t.Run("a missing condition is added", func(t *testing.T) {
		g := NewWithT(t)
		got := setReady(nil, ready(), 3)
		g.Expect(got).To(HaveLen(1))
		g.Expect(got[0]).To(HaveKeyWithValue("reason", ReadyReason))
	})
}

func TestPoolIndex(t *testing.T) {
	g := NewWithT(t)
	lmp := newObject(MachinePoolKind)
	lmp.SetNamespace("ns")
	lmp.SetName("mp")
	g.Expect(poolIndex(lmp, "ns/mp-0")).To(Equal(0))
	g.Expect(poolIndex(lmp, "ns/mp-12")).To(Equal(12))
	g.Expect(poolIndex(lmp, "ns/mp-1-0")).To(Equal(-1), "another pool's instance")
	g.Expect(poolIndex(lmp, "other/mp-0")).To(Equal(-1))
}
