package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/remote"
)

// restartSourceControllers scales the source's controllers back to their
// recorded replicas, and nothing else: pauses and the bypass wait
// for RestoringSource, which finishes the source's restore (idempotently).
func (r *MoveOperationReconciler) restartSourceControllers(ctx context.Context, s *scope) error {
	controllers, err := r.controllersToRestore(ctx, s, r.Source, movev1alpha1.ClusterSource)
	if err != nil {
		return err
	}
	restart, err := restartInOrder(ctx, r.Source, controllers, s.mo.Spec.Controllers.FallbackReplicasOrDefault())
	if err != nil {
		return fmt.Errorf("source cluster: %w", err)
	}
	r.reportGone(ctx, s, movev1alpha1.ClusterSource, restart.gone)
	return nil
}

// restore brings one cluster's controllers back to their recorded replicas,
// waits until they are Available, removes the webhook bypass, and, when
// finish is set, unpauses what this move paused (first, when noteCopies is
// given, noting on each object the move kept which copy it has; in the
// target after a move, checking the moved objects with its webhooks); last
// it forgets the recorded replicas. It reports done=false while it waits.
func (r *MoveOperationReconciler) restore(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole, finish bool,
	noteCopies func(context.Context) (outcome, error)) (outcome, error) {
	controllers, err := r.controllersToRestore(ctx, s, c, role)
	if err != nil {
		return outcome{}, err
	}
	if o, err := r.restartControllers(ctx, s, c, role, controllers); err != nil || !o.isDone() {
		return o, err
	}
	if finish {
		if o, err := r.finishRestore(ctx, s, c, role, noteCopies); err != nil || !o.isDone() {
			return o, err
		}
	}
	if err := quiesce.RemoveBypass(ctx, c); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	if err := quiesce.Forget(ctx, c, controllers); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	return done(), nil
}

// restartControllers scales one cluster's controllers back, the providers
// first and their managers once the providers are Available, and removes
// the bypass from the webhooks of those that run again. It is done once
// every one of them is Available.
func (r *MoveOperationReconciler) restartControllers(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole, controllers []quiesce.Controller) (outcome, error) {
	mo := s.mo
	restart, err := restartInOrder(ctx, c, controllers, mo.Spec.Controllers.FallbackReplicasOrDefault())
	if err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	r.reportGone(ctx, s, role, restart.gone)
	if len(restart.unavailable) > 0 {
		timeout := mo.Spec.Timeouts.ScaleUpTimeout()
		msg := fmt.Sprintf("%s controllers not yet Available: %s", role, formatReasons(restart.unavailable))
		if time.Since(s.phaseStarted()) > timeout {
			// Past the point of no return nothing can be undone: keep
			// waiting, and ask for a human.
			return stallOn(r.PollInterval, movev1alpha1.ReasonScaleUpTimeout, fmt.Sprintf(
				"%s after %s (spec.timeouts.scaleUp); check those Deployments' pods; the move goes on once they are Available", msg, timeout)), nil
		}
		return waitFor(r.PollInterval, "waiting: "+msg), nil
	}
	// The webhooks of the providers running again check what follows; those
	// of a provider that stays at zero (as the user left it) are down, and
	// keep letting the operator through until the last step.
	if err := r.removeBypassOfRunning(ctx, c, role, restart.restored); err != nil {
		return outcome{}, err
	}
	return done(), nil
}

// reportGone says which controllers the move stopped are gone from a
// cluster (their Deployments deleted during the move), so that they were
// not restored: whoever deleted them decides whether they come back.
func (r *MoveOperationReconciler) reportGone(ctx context.Context, s *scope, role movev1alpha1.ClusterRole, gone []types.NamespacedName) {
	if len(gone) == 0 {
		return
	}
	msg := fmt.Sprintf("controller Deployments the move stopped were deleted from the %s cluster during the move, so they are not restored: %s",
		strings.ToLower(string(role)), graph.JoinFirstTen(gone, ", "))
	log.FromContext(ctx).Info(msg)
	r.event(s.mo, "Warning", movev1alpha1.ReasonControllerGone, string(phaseOf(s.mo)), msg)
}

// finishRestore ends a restore that the move finishes (not a rollback's
// of the target): it notes, when noteCopies is given, which copy each
// object the source keeps has; in the target after a move it checks the
// moved objects with its webhooks; then it unpauses what this move paused.
func (r *MoveOperationReconciler) finishRestore(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole,
	noteCopies func(context.Context) (outcome, error)) (outcome, error) {
	ts, err := graph.DiscoverTypes(ctx, c)
	if err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	if noteCopies != nil {
		if o, err := noteCopies(ctx); err != nil || !o.isDone() {
			return o, err
		}
	}
	if role == movev1alpha1.ClusterTarget && s.mo.Status.Phase == movev1alpha1.PhaseRestoringTarget {
		r.validateInTarget(ctx, s, c)
	}
	if _, err := move.Unpause(ctx, c, ts, string(s.mo.UID), r.Move); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	return done(), nil
}

// recordCopiesOfKept notes on what the source keeps the copy the target
// holds of it, so that a later move of those objects recognises them.
func (r *MoveOperationReconciler) recordCopiesOfKept(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole, target *remote.Target) error {
	targetID, err := remote.ClusterID(ctx, target.Client)
	if err != nil {
		return fmt.Errorf("target cluster: %w", err)
	}
	plan, err := r.recordedPlan(ctx, s.mo)
	switch {
	case errors.Is(err, errNoRecord):
		// Past the point of no return: what is kept is not noted, and a
		// later move of it finds its copy as a conflict.
		log.FromContext(ctx).Info("not noting the copies of what the source keeps", "reason", err.Error())
		return nil
	case err != nil:
		return err
	}
	if _, err := move.RecordCopies(ctx, c, target.Client, targetID, plan, r.Move); err != nil {
		return fmt.Errorf("%s cluster: %w", role, err)
	}
	return nil
}

// installBypass lets the operator's own requests past the webhooks served
// by the controllers this move stops, in both clusters.
func (r *MoveOperationReconciler) installBypass(ctx context.Context, s *scope, target *remote.Target) error {
	for _, c := range r.clusters(target) {
		who, err := quiesce.WhoAmI(ctx, c.client)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		wh, err := r.webhooksOf(ctx, s, c.client, c.role)
		if err != nil {
			return err
		}
		if _, err := quiesce.InstallBypass(ctx, c.client, wh.Served, who.Username); err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
	}
	return nil
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
func (r *MoveOperationReconciler) followIdentities(ctx context.Context, s *scope, target *remote.Target) error {
	run := r.runFor(s.mo.UID)
	if !run.sourceIdentityFollowed {
		if err := r.followIdentity(ctx, s, clusterClient{role: movev1alpha1.ClusterSource, client: r.Source}); err != nil {
			return err
		}
		run.sourceIdentityFollowed = true
	}
	if target != nil && run.identityFollowed != target {
		if err := r.followIdentity(ctx, s, clusterClient{role: movev1alpha1.ClusterTarget, client: target.Client}); err != nil {
			return err
		}
		run.identityFollowed = target
	}
	return nil
}

// followIdentity asks a cluster who the operator is there, and moves to
// that identity every bypass condition that names another; each move is
// logged and raises a Warning event.
func (r *MoveOperationReconciler) followIdentity(ctx context.Context, s *scope, c clusterClient) error {
	who, err := quiesce.WhoAmI(ctx, c.client)
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
	clusters := []clusterClient{{role: movev1alpha1.ClusterSource, client: r.Source}}
	if target, err := r.Targets.Get(ctx, s.mo.Namespace, s.mo.Spec.Target.KubeconfigSecretRef); err == nil {
		clusters = append(clusters, clusterClient{role: movev1alpha1.ClusterTarget, client: target.Client})
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

// reassertBypassIn does reassertBypassAfter's work in one cluster and says
// what it wrote, if anything.
func (r *MoveOperationReconciler) reassertBypassIn(ctx context.Context, s *scope, c clusterClient, failed []string) (string, error) {
	called := strings.Join(failed, ", ")
	if r.controllersDown(s, c.role) {
		reinstalled, err := r.reinstallBypass(ctx, s, c, failed)
		if err != nil {
			return "", err
		}
		if len(reinstalled) > 0 {
			return fmt.Sprintf("webhooks this move bypasses were called for the operator (%s): the bypass had been removed from the %s's %s; installed it again",
				called, c.role, strings.Join(reinstalled, ", ")), nil
		}
	}
	refreshed, err := quiesce.RefreshBypass(ctx, c.client, failed, time.Now())
	if len(refreshed) == 0 {
		return "", err
	}
	return fmt.Sprintf("webhooks this move bypasses were called for the operator (%s); wrote the %s's %s again so that its API server reloads them (it may hold them as they were before the bypass)",
		called, c.role, strings.Join(refreshed, ", ")), err
}

// reinstallBypass installs the bypass again on those of the failed
// webhooks that the move's stopped controllers serve.
func (r *MoveOperationReconciler) reinstallBypass(ctx context.Context, s *scope, c clusterClient, failed []string) ([]string, error) {
	wh, err := r.webhooksOf(ctx, s, c.client, c.role)
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for _, n := range failed {
		named[n] = true
	}
	var refs []quiesce.WebhookRef
	for _, ref := range wh.Served {
		if named[ref.Webhook] {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	who, err := quiesce.WhoAmI(ctx, c.client)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", c.role, err)
	}
	written, err := quiesce.InstallBypass(ctx, c.client, refs, who.Username)
	if err != nil {
		return written, fmt.Errorf("%s cluster: %w", c.role, err)
	}
	return written, nil
}

// controllersDown reports whether every controller the move stopped in
// the cluster is meant to be at zero now, so that every webhook they serve
// must let the operator through: from ScalingDown to Deleting in both
// clusters; in a rollback, in the target once the source is restored and
// until what the move created there is deleted (the target's controllers
// come back after that).
func (r *MoveOperationReconciler) controllersDown(s *scope, role movev1alpha1.ClusterRole) bool {
	switch phaseOf(s.mo) {
	case movev1alpha1.PhaseScalingDown, movev1alpha1.PhaseCopying, movev1alpha1.PhaseDeleting:
		return true
	case movev1alpha1.PhaseRollingBack:
		run := r.runFor(s.mo.UID)
		return role == movev1alpha1.ClusterTarget && run.sourceRestored && !run.targetCleared
	}
	return false
}

// removeBypassOfRunning removes the bypass from the webhooks served by the
// restored controllers that run (replicas above zero).
func (r *MoveOperationReconciler) removeBypassOfRunning(ctx context.Context, c client.Client, role movev1alpha1.ClusterRole, restored []quiesce.Controller) error {
	var running []quiesce.Controller
	for _, ctrl := range restored {
		if ctrl.Replicas > 0 {
			running = append(running, ctrl)
		}
	}
	if len(running) == 0 {
		return nil
	}
	wh, err := quiesce.FindWebhooks(ctx, c, running)
	if err != nil {
		return fmt.Errorf("%s cluster: %w", role, err)
	}
	if err := quiesce.RemoveBypassFrom(ctx, c, wh.Served); err != nil {
		return fmt.Errorf("%s cluster: %w", role, err)
	}
	return nil
}

// controllersToRestore returns the controllers of one cluster that this
// move stopped: those recorded in status, and those carrying the
// original-replicas annotation (recorded on the Deployment before a crash
// kept it out of status). A Deployment with neither was never touched.
func (r *MoveOperationReconciler) controllersToRestore(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole) ([]quiesce.Controller, error) {
	found, err := r.selectControllers(ctx, s, c, role)
	if err != nil {
		return nil, err
	}
	seen := map[types.NamespacedName]bool{}
	var out []quiesce.Controller
	for _, ctrl := range found {
		if ctrl.Recorded != nil {
			out = append(out, ctrl)
			seen[ctrl.Key] = true
		}
	}
	for _, ctrl := range r.recordedControllers(s, role) {
		if !seen[ctrl.Key] {
			out = append(out, ctrl)
		}
	}
	return out, nil
}

// recordedControllers returns the controllers of one cluster recorded in status.
func (r *MoveOperationReconciler) recordedControllers(s *scope, role movev1alpha1.ClusterRole) []quiesce.Controller {
	var out []quiesce.Controller
	for _, c := range s.mo.Status.Controllers {
		if c.Cluster == role {
			out = append(out, quiesce.Controller{Key: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, Recorded: ptr.To(c.OriginalReplicas), Manager: c.Manager})
		}
	}
	return out
}

// webhooksOf maps a cluster's webhooks to the controllers this move stops
// there (recorded in status once Recording is done, selected before).
func (r *MoveOperationReconciler) webhooksOf(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole) (*quiesce.Webhooks, error) {
	controllers := r.recordedControllers(s, role)
	if len(s.mo.Status.Controllers) == 0 {
		var err error
		if controllers, err = r.selectControllers(ctx, s, c, role); err != nil {
			return nil, err
		}
	}
	wh, err := quiesce.FindWebhooks(ctx, c, controllers)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", role, err)
	}
	return wh, nil
}

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
// restored.
func (r *MoveOperationReconciler) clusters(target *remote.Target) []clusterClient {
	return []clusterClient{{movev1alpha1.ClusterTarget, target.Client}, {movev1alpha1.ClusterSource, r.Source}}
}

// excluded returns the Deployments never to stop in a cluster: the
// operator's own, in the source.
func (r *MoveOperationReconciler) excluded(role movev1alpha1.ClusterRole) []types.NamespacedName {
	if role == movev1alpha1.ClusterSource && r.Self.Name != "" {
		return []types.NamespacedName{r.Self}
	}
	return nil
}

func clusterSelectorOf(mo *movev1alpha1.MoveOperation) (labels.Selector, error) {
	if mo.Spec.ClusterSelector == nil {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(mo.Spec.ClusterSelector)
}

func controllerSelectorOf(mo *movev1alpha1.MoveOperation) (labels.Selector, error) {
	sel := mo.Spec.Controllers.Selector
	if sel == nil {
		sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: movev1alpha1.DefaultControllerLabel, Operator: metav1.LabelSelectorOpExists,
		}}}
	}
	return metav1.LabelSelectorAsSelector(sel)
}

func progressOf(mo *movev1alpha1.MoveOperation, plan *graph.Plan) *movev1alpha1.MoveProgress {
	if mo.Status.Progress == nil {
		mo.Status.Progress = &movev1alpha1.MoveProgress{Total: int32(plan.Len())}
	}
	return mo.Status.Progress
}

// setCopyProgress sets what Copying has done: the first next groups of the
// pinned plan, out of all of it (which leaves out whatever was deleted since
// Validating counted it).
func setCopyProgress(p *movev1alpha1.MoveProgress, plan *graph.Plan, next int) {
	p.Total = int32(plan.Len())
	p.CopiedGroups = int32(next)
	p.Copied = int32(objectsIn(plan.Groups[:next]))
}

func objectsIn(groups [][]*graph.Object) int {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	return n
}

// joinRefs names objects for a message, the first ten of them.
func joinRefs(refs []graph.ObjectRef) string { return preflight.JoinRefs(refs) }

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (%d)", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func formatReasons(m map[types.NamespacedName]string) string {
	keys := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (%s)", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
