package controllers

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/remote"
)

// installBypass lets the operator's own requests past the webhooks served
// by the controllers this move stops, in both clusters.
func (r *MoveOperationReconciler) installBypass(ctx context.Context, s *scope, target *remote.Target) error {
	return r.forBoth(ctx, target, func(ctx context.Context, _ int, c clusterClient) error {
		who, err := r.whoAmI(ctx, s, c.client)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		// The bypass is written on the configurations webhooksOf listed.
		look, err := oneLook(s, c.client)
		if err != nil {
			return err
		}
		wh, err := r.webhooksOf(ctx, s, look, c.role)
		if err != nil {
			return err
		}
		if _, err := quiesce.InstallBypass(ctx, look, wh.Served, who.Username); err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		return nil
	})
}

// followIdentities makes the webhook bypass in each cluster let through
// the identity the operator has there now, once per client: in the target,
// for each new kubeconfig its Secret holds (a rotated credential may be
// another ServiceAccount's); in the source, once per operator run (the
// operator may run as another ServiceAccount than the one that began the
// move). target is nil where only the source is looked at.
//
// Nothing of it is kept but in the clusters: the bypass's match condition
// names the identity it lets through, and is rewritten in place (see
// quiesce.RebindBypass), so a crash between two configurations leaves
// some naming the old identity, and the next run, which checks once
// before it writes, rewrites them. The removal of the bypass goes by the
// condition's name, whichever identity it names.
//
// It is a preamble (see substeps.go): prepare calls it, for the phases
// and sub-steps whose preamble says so.
func (r *MoveOperationReconciler) followIdentities(ctx context.Context, s *scope, target *remote.Target) error {
	mem := r.memoOf(s.mo.UID)
	if !mem.hasFinished(anyPhase, sourceIdentityFollowed) {
		if err := r.followIdentity(ctx, s, clusterClient{role: movev1alpha1.ClusterSource, client: r.Source}); err != nil {
			return err
		}
		mem.finish(anyPhase, sourceIdentityFollowed)
	}
	if target != nil && mem.followedTarget != target {
		if err := r.followIdentity(ctx, s, clusterClient{role: movev1alpha1.ClusterTarget, client: target.Client}); err != nil {
			return err
		}
		mem.followedTarget = target
	}
	return nil
}

// sourceIdentityFollowed is recorded in the move's memo (see memo.finished), for
// whichever phase (anyPhase), once the bypass in the source names the
// identity the operator runs as: the source's client does not change while
// the operator runs.
const sourceIdentityFollowed = "the operator's identity in the source followed"

// anyPhase records in the run what holds whichever the phase.
const anyPhase movev1alpha1.MovePhase = ""

// followIdentity asks a cluster who the operator is there, and moves to
// that identity every bypass condition that names another; each move is
// logged and raises a Warning event.
func (r *MoveOperationReconciler) followIdentity(ctx context.Context, s *scope, c clusterClient) error {
	who, err := r.whoAmI(ctx, s, c.client)
	if err != nil {
		return fmt.Errorf("%s cluster: %w", c.role, err)
	}
	rebound, err := quiesce.RebindBypass(ctx, c.client, who.Username)
	if len(rebound.Configurations) > 0 {
		msg := identityChangedMessage(s, c.role, who.Username, rebound)
		log.FromContext(ctx).Info(msg, "cluster", c.role)
		r.event(s.mo, "Warning", movev1alpha1.ReasonIdentityChanged, string(phaseOf(s.mo)), msg)
	}
	if err != nil {
		return fmt.Errorf("%s cluster: %w", c.role, err)
	}
	return nil
}

func identityChangedMessage(s *scope, role movev1alpha1.ClusterRole, now string, rebound quiesce.Rebound) string {
	before := make([]string, 0, len(rebound.From))
	for _, u := range rebound.From {
		if u == "" {
			before = append(before, "an identity written in a form the operator does not write")
			continue
		}
		before = append(before, strconv.Quote(u))
	}
	how := "runs as another ServiceAccount"
	if role == movev1alpha1.ClusterTarget {
		ref := s.mo.Spec.Target.KubeconfigSecretRef
		how = fmt.Sprintf("uses the new credential of Secret %s/%s", s.mo.Namespace, ref.Name)
	}
	return fmt.Sprintf("the operator's identity in the %s cluster changed: it %s, and is %q there, no longer %s; the webhook bypass of the move now lets %q through, and no longer the old identity (wrote %s)",
		strings.ToLower(string(role)), how, now, strings.Join(before, ", "), now, strings.Join(rebound.Configurations, ", "))
}

// reassertBypassAfter looks in a step's error for admission webhooks the
// API server failed to call for the operator, and makes the bypass hold
// again where it should: past the point of no return a refused write is
// retried for ever, with every provider at zero, so the move must not
// depend on the bypass staying as ScalingDown left it.
//
//   - While the move's controllers are down in a cluster (see
//     controllersDown), a webhook they serve that lost its bypass there
//     (somebody applied the provider's manifests again: a GitOps tool, an
//     installer) gets it back.
//   - A webhook that holds the bypass and was called all the same means
//     the API server is using its configuration from before the bypass
//     (see quiesce.RefreshBypass): the configuration is written again so
//     that it reloads it. That holds in every phase.
//
// Both clusters are looked at, as the error does not say whose API server
// refused (the providers, and so the webhook names, are the same in both);
// a refresh of the cluster that did not refuse costs one harmless write.
// Each write is logged and raises a Warning event; a failure here is only
// logged, the step's retry comes back to it.
func (r *MoveOperationReconciler) reassertBypassAfter(ctx context.Context, s *scope, stepErr error) {
	failed := quiesce.FailedWebhooks(stepErr)
	if len(failed) == 0 {
		return
	}
	var clusters []clusterClient
	switch {
	case s.mo.Spec.IsRestore():
		clusters = r.clusters(r.localTarget())
	case s.mo.Spec.Target.IsBackup():
		clusters = r.clusters(nil)
	default:
		clusters = []clusterClient{{role: movev1alpha1.ClusterSource, client: r.Source}}
		if target, err := r.Targets.Get(ctx, s.mo.Namespace, s.mo.Spec.Target.KubeconfigSecretRef); err == nil {
			clusters = append(clusters, clusterClient{role: movev1alpha1.ClusterTarget, client: target.Client})
		}
	}
	logger := log.FromContext(ctx)
	for _, c := range clusters {
		msg, err := r.reassertBypassIn(ctx, s, c, failed)
		if err != nil {
			logger.Info("could not make the webhook bypass hold again; the step's retry will try again", "cluster", c.role, "error", err.Error())
		}
		if msg != "" {
			logger.Info(msg, "cluster", c.role)
			r.event(s.mo, "Warning", movev1alpha1.ReasonBypassReapplied, string(phaseOf(s.mo)), msg)
		}
	}
}

// reassertBypassIn does reassertBypassAfter's work in one cluster
// (quiesce.Reassert) and says what it wrote, if anything.
func (r *MoveOperationReconciler) reassertBypassIn(ctx context.Context, s *scope, c clusterClient, failed []string) (string, error) {
	down := r.controllersDown(s, c.role)
	var served []quiesce.WebhookRef
	if down {
		look, err := oneLook(s, c.client)
		if err != nil {
			return "", err
		}
		wh, err := r.webhooksOf(ctx, s, look, c.role)
		if err != nil {
			return "", err
		}
		served = wh.Served
	}
	username := func() (string, error) {
		who, err := r.whoAmI(ctx, s, c.client)
		return who.Username, err
	}
	msg, err := quiesce.Reassert(ctx, c.client, string(c.role), served, username, failed, down)
	if err != nil {
		return msg, fmt.Errorf("%s cluster: %w", c.role, err)
	}
	return msg, nil
}

// webhooksOf maps a cluster's webhooks to the controllers this move stops
// there (recorded in status once Recording is done, selected before).
// Give it a look (oneLook) at the cluster: it reads the controllers'
// Deployments, lists the webhook configurations twice (the managers' and
// the controllers') and reads their Services.
func (r *MoveOperationReconciler) webhooksOf(ctx context.Context, s *scope, look client.Client, role movev1alpha1.ClusterRole) (*quiesce.Webhooks, error) {
	controllers := r.recordedControllers(s, role)
	if len(s.mo.Status.Controllers) == 0 {
		var err error
		if controllers, err = r.selectControllers(ctx, s, look, role); err != nil {
			return nil, err
		}
	}
	wh, err := quiesce.FindWebhooks(ctx, look, controllers)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", role, err)
	}
	return wh, nil
}
