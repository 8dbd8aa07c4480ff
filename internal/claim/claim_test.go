package claim_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/move-operator/move-operator/internal/claim"
)

func newLock(t *testing.T) claim.Lock {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return claim.Lock{Client: fake.NewClientBuilder().WithScheme(s).Build(), Key: types.NamespacedName{Namespace: "ops", Name: claim.DefaultName}}
}

func holder(i int) claim.Holder {
	return claim.Holder{Namespace: "ns", Name: fmt.Sprintf("mo-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}
}

// everyoneActive says every holder still moves.
func everyoneActive(context.Context, claim.Holder) (bool, error) { return true, nil }

func TestOfManyOperationsAcquiringAtOnceExactlyOneHoldsTheClaim(t *testing.T) {
	for round := range 20 {
		lock := newLock(t)
		const n = 8
		got := make([]claim.Holder, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = lock.Acquire(context.Background(), holder(i), everyoneActive) })
		}
		wg.Wait()
		winners := 0
		var winner claim.Holder
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: Acquire for %s: %v", round, holder(i), errs[i])
			}
			if got[i] == holder(i) {
				winners++
				winner = got[i]
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d operations hold the claim, want exactly 1", round, winners)
		}
		for i := range n {
			if got[i] != winner {
				t.Errorf("round %d: %s was told %s holds the claim, but %s does", round, holder(i), got[i], winner)
			}
		}
	}
}

func TestAClaimIsKeptByItsHolderAndTakenOverOnlyFromAnEndedOne(t *testing.T) {
	ctx := context.Background()
	lock := newLock(t)
	ended := map[claim.Holder]bool{}
	var active claim.Active = func(_ context.Context, h claim.Holder) (bool, error) { return !ended[h], nil }

	mustAcquire := func(h, want claim.Holder) {
		t.Helper()
		got, err := lock.Acquire(ctx, h, active)
		if err != nil || got != want {
			t.Fatalf("Acquire(%s) = %s, %v; want %s", h, got, err, want)
		}
	}
	mustAcquire(holder(1), holder(1))
	mustAcquire(holder(1), holder(1)) // a resumed holder keeps its claim
	mustAcquire(holder(2), holder(1)) // another waits while the holder moves

	ended[holder(1)] = true // ended without releasing (a crash before it could)
	mustAcquire(holder(2), holder(2))

	if err := lock.Release(ctx, holder(1)); err != nil {
		t.Fatalf("releasing a claim held by another: %v", err)
	}
	mustAcquire(holder(3), holder(2)) // holder 1's release did not free holder 2's claim

	if err := lock.Release(ctx, holder(2)); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	if err := lock.Client.Get(ctx, lock.Key, lease); client.IgnoreNotFound(err) != nil || err == nil {
		t.Fatalf("after its holder released it, the Lease must be gone; Get: %v", err)
	}
	mustAcquire(holder(3), holder(3))
}
