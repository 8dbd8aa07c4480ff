package controllers

import (
	"context"
	"errors"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/remote"
)

func TestForBothActsOnBothClustersAtOnceAndJoinsTheirErrors(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	target := &remote.Target{Client: f.target}
	var mu sync.Mutex
	var started sync.WaitGroup
	started.Add(2)
	seen := map[int]movev1alpha1.ClusterRole{}
	err := f.r.forBoth(context.Background(), target, func(_ context.Context, i int, c clusterClient) error {
		mu.Lock()
		seen[i] = c.role
		mu.Unlock()
		// Neither returns before both have started: one waiting for
		// the other would never end.
		started.Done()
		started.Wait()
		if c.role == movev1alpha1.ClusterSource {
			return errors.New("source cluster: refused")
		}
		return nil
	})
	g.Expect(seen).To(Equal(map[int]movev1alpha1.ClusterRole{0: movev1alpha1.ClusterTarget, 1: movev1alpha1.ClusterSource}))
	g.Expect(err).To(MatchError("source cluster: refused"))
}
