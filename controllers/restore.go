package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/remote"
)

// restartSourceControllers scales the source's controllers back to their
// recorded replicas, and nothing else: pauses and the bypass wait
// for RestoringSource, which finishes the source's restore (idempotently).
func (r *MoveOperationReconciler) restartSourceControllers(ctx context.Context, s *scope) error {
	look, err := oneLook(s, r.Source)
	if err != nil {
		return err
	}
	controllers, err := r.controllersToRestore(ctx, s, look, movev1alpha1.ClusterSource)
	if err != nil {
		return err
	}
	restart, err := quiesce.RestartInOrder(ctx, look, controllers, s.mo.Spec.Controllers.FallbackReplicasOrDefault())
	if err != nil {
		return fmt.Errorf("source cluster: %w", err)
	}
	r.reportGone(ctx, s, movev1alpha1.ClusterSource, restart.Gone)
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
	// One look at the controllers' Deployments and webhooks serves the
	// restart and, once they are Available, removing the bypass and
	// forgetting their recorded replicas: nobody but the move writes
	// either meanwhile, and a write of somebody else's (a caBundle
	// rotated) makes the look's write conflict and read again.
	look, err := oneLook(s, c)
	if err != nil {
		return outcome{}, err
	}
	controllers, err := r.controllersToRestore(ctx, s, look, role)
	if err != nil {
		return outcome{}, err
	}
	restarted, err := r.restartControllers(ctx, s, look, role, controllers)
	if err != nil || !restarted.isDone() {
		return restarted, err
	}
	finished := done()
	if finish {
		if finished, err = r.finishRestore(ctx, s, c, role, noteCopies); err != nil || !finished.isDone() {
			return finished.reaching(restarted.reached...), err
		}
	}
	if err := quiesce.RemoveBypass(ctx, look); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	if err := quiesce.Forget(ctx, look, controllers); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	return done().reaching(restarted.reached...).reaching(finished.reached...), nil
}

// restartControllers scales one cluster's controllers back, the providers
// first and their managers once the providers are Available, and removes
// the bypass from the webhooks of those that run again. It is done once
// every one of them is Available.
func (r *MoveOperationReconciler) restartControllers(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole, controllers []quiesce.Controller) (outcome, error) {
	mo := s.mo
	restart, err := quiesce.RestartInOrder(ctx, c, controllers, mo.Spec.Controllers.FallbackReplicasOrDefault())
	if err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	r.reportGone(ctx, s, role, restart.Gone)
	var reached []string
	if role == movev1alpha1.ClusterTarget && phaseOf(mo) == movev1alpha1.PhaseRestoringTarget {
		reached = append(reached, targetScaledUp)
	}
	if len(restart.Unavailable) > 0 {
		timeout := mo.Spec.Timeouts.ScaleUpTimeout()
		msg := fmt.Sprintf("%s controllers not yet Available: %s", role, formatReasons(restart.Unavailable))
		if time.Since(s.phaseStarted()) > timeout {
			// Past the point of no return nothing can be undone: keep
			// waiting, and ask for a human.
			return stallOn(r.PollInterval, movev1alpha1.ReasonScaleUpTimeout, fmt.Sprintf(
				"%s after %s (spec.timeouts.scaleUp); check those Deployments' pods; the move goes on once they are Available", msg, timeout)).reaching(reached...), nil
		}
		return r.poll(s, "restart "+string(role), msg).reaching(reached...), nil
	}
	// The webhooks of the providers running again check what follows; those
	// of a provider that stays at zero (as the user left it) are down, and
	// keep letting the operator through until the last step.
	if err := quiesce.RemoveBypassOfRunning(ctx, c, restart.Restored); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	return done().reaching(reached...), nil
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

// typesOf discovers the kinds of the cluster c is the client of: the
// source's through the cache the phases share.
func (r *MoveOperationReconciler) typesOf(ctx context.Context, c client.Client, role movev1alpha1.ClusterRole) (*graph.Types, error) {
	if role == movev1alpha1.ClusterSource {
		return r.sourceTypes.Discover(ctx, c)
	}
	return graph.DiscoverTypes(ctx, c)
}

// finishRestore ends a restore that the move finishes (not a rollback's
// of the target): it notes, when noteCopies is given, which copy each
// object the source keeps has; in the target after a move it checks the
// moved objects with its webhooks; then it unpauses what this move paused.
func (r *MoveOperationReconciler) finishRestore(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole,
	noteCopies func(context.Context) (outcome, error)) (outcome, error) {
	ts, err := r.typesOf(ctx, c, role)
	if err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	if noteCopies != nil {
		if o, err := noteCopies(ctx); err != nil || !o.isDone() {
			return o, err
		}
	}
	var reached []string
	if role == movev1alpha1.ClusterTarget && s.mo.Status.Phase == movev1alpha1.PhaseRestoringTarget && r.validateInTarget(ctx, s, c) {
		reached = append(reached, targetValidated)
	}
	pausedBy, err := r.pausedByOf(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	if _, err := move.Unpause(ctx, c, ts, pausedBy, r.Move); err != nil {
		return outcome{}, fmt.Errorf("%s cluster: %w", role, err)
	}
	return done().reaching(reached...), nil
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

// controllersDown reports whether every controller the move stopped in the
// cluster is meant to be at zero now, so that every webhook they serve must
// let the operator through: the phase table's controllersDown column says.
func (r *MoveOperationReconciler) controllersDown(s *scope, role movev1alpha1.ClusterRole) bool {
	down := specOf(phaseOf(s.mo)).controllersDown
	return down != nil && down(r.memoOf(s.mo.UID), role)
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
