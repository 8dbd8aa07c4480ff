package main

import (
	"context"
	"fmt"
	"time"

	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	usermove "github.com/move-operator/move-operator/test/mover"
)

// clusterctlMover moves a fleet's namespace with clusterctl's library, as
// `clusterctl move --namespace NS --kubeconfig SOURCE --to-kubeconfig
// TARGET` does, with every provider Deployment running.
type clusterctlMover struct {
	b      *bench
	f      benchFleet
	client clusterctl.Client
	// tl holds when clusterctl logged its milestones.
	tl *usermove.Timeline
}

func (m *clusterctlMover) prepare(ctx context.Context) ([]component, error) {
	c, err := usermove.NewClusterctlClient(ctx, m.b.workDir)
	if err != nil {
		return nil, err
	}
	m.client = c
	m.tl = usermove.ClusterctlTimeline()
	m.b.clusterctlLog.Follow(m.tl)
	_ = m.b.clusterctlLog.Flush()
	return nil, nil
}

// move times the whole Move call. Its copy+delete part runs from the log
// line announcing the creates (usermove.ClusterctlCreating) to the one that
// follows the last delete (usermove.ClusterctlResuming): what comes before is
// discovery, the provisioning checks and pausing, what comes after is
// unpausing in the target.
func (m *clusterctlMover) move(ctx context.Context, r *result) error {
	src, tgt := m.b.clusters.env.Source, m.b.clusters.env.Target
	began := time.Now()
	err := m.client.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: src.KubeconfigPath, Context: src.Name},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: tgt.KubeconfigPath, Context: tgt.Name},
		Namespace:      m.f.namespace,
	})
	ended := time.Now()
	if err != nil {
		return fmt.Errorf("clusterctl move --namespace %s: %w", m.f.namespace, err)
	}
	r.whole = ended.Sub(began)
	creating, deleting, resuming := m.tl.Seen(usermove.ClusterctlCreating), m.tl.Seen(usermove.ClusterctlDeleting), m.tl.Seen(usermove.ClusterctlResuming)
	if creating.IsZero() || deleting.IsZero() || resuming.IsZero() {
		return fmt.Errorf("clusterctl did not log %q, %q and %q: this bench reads its copy and delete times from them",
			usermove.ClusterctlCreating, usermove.ClusterctlDeleting, usermove.ClusterctlResuming)
	}
	r.copy, r.delete, r.copyDelete = deleting.Sub(creating), resuming.Sub(deleting), resuming.Sub(creating)
	return nil
}

func (m *clusterctlMover) finish(context.Context, *result) error { return nil }
