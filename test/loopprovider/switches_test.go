package loopprovider

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestDeleteIgnoresMove(t *testing.T) {
	paused := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	movedAway := func() *metav1.ObjectMeta {
		now := metav1.NewTime(time.Now())
		return &metav1.ObjectMeta{DeletionTimestamp: &now, Annotations: map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}}
	}
	live := newObject(MachineKind)
	deleting := newObject(MachineKind)
	m := movedAway()
	deleting.SetDeletionTimestamp(m.DeletionTimestamp)
	deleting.SetAnnotations(m.Annotations)

	t.Run("a well-behaved provider leaves a paused object alone and keeps the VMs of one deleted for a move", func(t *testing.T) {
		g := NewWithT(t)
		b := base{opts: Options{Switches: &Switches{}}}
		g.Expect(b.paused(paused, deleting)).To(BeTrue())
		g.Expect(b.deletedForMove(deleting)).To(BeTrue())
	})
	t.Run("with the switch on, a deleted object is reconciled while paused and its move mark is ignored", func(t *testing.T) {
		g := NewWithT(t)
		s := &Switches{}
		s.SetDeleteIgnoresMove(true)
		b := base{opts: Options{Switches: s}}
		g.Expect(b.paused(paused, deleting)).To(BeFalse())
		g.Expect(b.deletedForMove(deleting)).To(BeFalse())
	})
	t.Run("with the switch on, the normal path still respects pause", func(t *testing.T) {
		g := NewWithT(t)
		s := &Switches{}
		s.SetDeleteIgnoresMove(true)
		b := base{opts: Options{Switches: s}}
		g.Expect(b.paused(paused, live)).To(BeTrue())
	})
	t.Run("the predicate lets a paused object's deletion through only with the switch on", func(t *testing.T) {
		g := NewWithT(t)
		annotated := deleting.DeepCopy()
		annotated.SetAnnotations(map[string]string{clusterv1.PausedAnnotation: ""})
		s := &Switches{}
		b := base{opts: Options{Switches: s}}
		g.Expect(b.notPaused().Generic(event.GenericEvent{Object: annotated})).To(BeFalse())
		s.SetDeleteIgnoresMove(true)
		g.Expect(b.notPaused().Generic(event.GenericEvent{Object: annotated})).To(BeTrue())
	})
}
