package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/move-operator/move-operator/test/devfleet"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/takeover"
)

// With -capd the fleets are Cluster API's own in-memory provider's (CAPD
// v1.14.2, package devfleet), made as a user makes them and provisioned by
// the source's live controllers: the ratios on a provider nobody here
// wrote. Every controller runs in both clusters throughout, as in a real
// move: clusterctl pauses the Clusters and leaves them running; the
// operator stops them. The target's ClusterClass stand-in still marks
// copied ClusterClasses reconciled (see README's "two choices favour
// clusterctl"): the real ClusterClass controller skips the paused copies
// clusterctl makes.

// devSettleBound bounds how long the source's controllers may take to
// provision a fleet and leave it alone.
const devSettleBound = 15 * time.Minute

// devQuiet is how long the controllers must have left a fleet alone before
// it is moved: nothing in flight.
const devQuiet = 10 * time.Second

// createDevFleet creates n CAPD in-memory clusters in namespace ns and waits
// until the source's controllers have provisioned them and left them alone.
// A fleet that fails is deleted: unlike a static fleet, the live controllers
// would keep working on it through the moves.
func (c *clusters) createDevFleet(ctx context.Context, n int, ns string) (_ *fleet.Fleet, err error) {
	src := c.env.Source
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := src.Client.Create(ctx, namespace); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	defer func() {
		if err != nil {
			_ = src.Client.Delete(context.WithoutCancel(ctx), namespace)
		}
	}()
	f, err := devfleet.Create(ctx, src.Client, devfleet.Options{Namespace: ns, Prefix: ns, Clusters: n})
	if err != nil {
		return nil, err
	}
	began := time.Now()
	ours := takeover.InFleet(f)
	if err := takeover.Poll(ctx, devSettleBound, func() error {
		if err := takeover.Available(ctx, src, f); err != nil {
			return err
		}
		if err := takeover.Running(ctx, src, f); err != nil {
			return err
		}
		return takeover.Quiet(src, ours, devQuiet)
	}); err != nil {
		return nil, fmt.Errorf("the CAPD fleet in %s was not provisioned: %w", ns, err)
	}
	say("  %d CAPD in-memory clusters provisioned in %s by the source's controllers in %s", n, ns, time.Since(began).Round(time.Second))
	return f, nil
}
