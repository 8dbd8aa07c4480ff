package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/remote"
)

// target returns the target's client. When the Secret or kubeconfig is
// wrong (changed since Validating, which waits until it is right) it says
// why, and the phase waits: for a human where the table says so
// (stallsWithoutTarget); in a phase that rolls back on failure, as an
// error, so that the phase's timeout rolls the move back if the Secret is
// not mended in time (a wait there would bypass that bound, with the
// providers stopped); past the point of no return, for the Secret to be
// mended.
func (r *MoveOperationReconciler) target(ctx context.Context, s *scope) (*remote.Target, outcome, error) {
	t, err := r.Targets.Get(ctx, s.mo.Namespace, s.mo.Spec.Target.KubeconfigSecretRef)
	if err == nil {
		return t, done(), nil
	}
	var re *remote.Error
	if !errors.As(err, &re) {
		return nil, outcome{}, fmt.Errorf("connecting to the target: %w", err)
	}
	spec := specOf(phaseOf(s.mo))
	switch {
	case spec.stallsWithoutTarget:
		return nil, stallOn(10*time.Second, re.Reason, re.Message), nil
	case spec.onFailure == movev1alpha1.PhaseRollingBack:
		return nil, outcome{}, fmt.Errorf("cannot use the target: %w", err)
	}
	return nil, waitFor(10*time.Second, fmt.Sprintf("cannot reach the target: %s", re.Message)), nil
}

type clusterClient struct {
	role   movev1alpha1.ClusterRole
	client client.Client
}

// clusters returns both clusters, target first: the order in which they are
// restored. A backup, whose target is an archive (nil), has the source
// only; a restore, whose source is an archive, the target only.
func (r *MoveOperationReconciler) clusters(target *remote.Target) []clusterClient {
	switch {
	case target == nil:
		return []clusterClient{{movev1alpha1.ClusterSource, r.Source}}
	case target.Local:
		// A restore's target is the operator's own cluster, and its
		// source an archive.
		return []clusterClient{{movev1alpha1.ClusterTarget, target.Client}}
	}
	return []clusterClient{{movev1alpha1.ClusterTarget, target.Client}, {movev1alpha1.ClusterSource, r.Source}}
}

// forBoth runs do for both clusters at once, target as i 0 and source as
// 1, and joins their errors. The steps that act on each cluster alike and
// in no order (the bypass, the record of the controllers, stopping them,
// checking they stay stopped) need not wait for the other cluster's
// requests: every provider is stopped, or about to be, while they run.
// The restores, which go target first, do not use it. do must write
// nothing shared but its own index of a slice.
func (r *MoveOperationReconciler) forBoth(ctx context.Context, target *remote.Target, do func(ctx context.Context, i int, c clusterClient) error) error {
	cs := r.clusters(target)
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = do(ctx, i, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
