package planrecord

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// TestRecordsOfCopiesAddUp records a group's copies batch by batch, a batch
// twice (a resumed move, in another order), and another group: every copy
// recorded reads back, and a batch recorded again writes nothing new.
func TestRecordsOfCopiesAddUp(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "move", UID: "op-1"}}
	for _, batch := range []struct {
		group int
		uids  []types.UID
	}{
		{0, []types.UID{"a", "b"}},
		{0, []types.UID{"c"}},
		{0, []types.UID{"b", "a"}},
		{1, []types.UID{"d"}},
	} {
		if err := SaveCopies(ctx, c, mo, batch.group, batch.uids); err != nil {
			t.Fatalf("recording %v of group %d: %v", batch.uids, batch.group, err)
		}
	}
	got, err := LoadCopies(ctx, c, "ops", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.UID]bool{"a": true, "b": true, "c": true, "d": true}, got); diff != "" {
		t.Errorf("the copies read back differ from those recorded (-want +got):\n%s", diff)
	}
	cms := &corev1.ConfigMapList{}
	if err := c.List(ctx, cms); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 3 {
		t.Errorf("%d ConfigMaps hold the record, want one per distinct batch, 3", len(cms.Items))
	}
	if others, err := LoadCopies(ctx, c, "ops", "op-2"); err != nil || len(others) != 0 {
		t.Errorf("another operation's copies: %v, %v; want none", others, err)
	}
}
