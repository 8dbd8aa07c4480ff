package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/remote"
)

// phaseFunc performs (part of) one phase. It advances the phase with
// scope.enter when the phase is complete; the reconcile then writes the
// status before the next phase starts.
type phaseFunc func(ctx context.Context, s *scope) (ctrl.Result, error)

// reconcilePhase runs the function of the MoveOperation's current phase.
func (r *MoveOperationReconciler) reconcilePhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	phases := map[movev1alpha1.MovePhase]phaseFunc{
		movev1alpha1.PhasePending:         r.reconcilePending,
		movev1alpha1.PhaseValidating:      r.reconcileValidating,
		movev1alpha1.PhaseRecording:       r.reconcileRecording,
		movev1alpha1.PhaseScalingDown:     r.reconcileScalingDown,
		movev1alpha1.PhaseCopying:         r.reconcileCopying,
		movev1alpha1.PhaseDeleting:        r.reconcileDeleting,
		movev1alpha1.PhaseRestoringTarget: r.reconcileRestoringTarget,
		movev1alpha1.PhaseRestoringSource: r.reconcileRestoringSource,
		movev1alpha1.PhaseRollingBack:     r.reconcileRollingBack,
	}
	phase := phaseOf(s.mo)
	fn, ok := phases[phase]
	if !ok { // Done and Failed: nothing left to do but let go.
		r.runs.Delete(s.mo.UID)
		return ctrl.Result{}, r.release(ctx, s.mo)
	}
	res, err := fn(ctx, s)
	if err != nil {
		// Say in the status what goes wrong while it is retried.
		s.waiting = fmt.Sprintf("retrying after an error: %v", err)
		return res, err
	}
	if phaseOf(s.mo) != phase {
		// Write the status now, then go on with the next phase.
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return res, nil
}

// reconcilePending starts the move once it holds the claim on the source
// cluster, so that one MoveOperation at a time moves it; a dry run never
// waits, since it writes nothing.
func (r *MoveOperationReconciler) reconcilePending(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	if len(mo.Status.PhaseTransitions) == 0 {
		s.enter(movev1alpha1.PhasePending)
	}
	if !mo.Spec.DryRun {
		// An atomic claim, not a look at the other MoveOperations: a cache
		// may not show yet that another one has just started.
		holder, err := r.acquireClaim(ctx, mo)
		if err != nil {
			return ctrl.Result{}, err
		}
		if holder.UID != mo.UID {
			s.waiting = fmt.Sprintf("MoveOperation %s is moving this cluster; this one starts when it has ended", holder)
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	mo.Status.StartTime = ptrTime(time.Now())
	s.enter(movev1alpha1.PhaseValidating)
	return ctrl.Result{}, nil
}

// reconcileValidating checks everything that can be checked before writing:
// the input, the target, the CRDs and providers, the objects to move. A
// problem a human can fix without changing the MoveOperation (the Secret,
// the target's reachability) is waited for; any other fails the move.
func (r *MoveOperationReconciler) reconcileValidating(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	clusterSelector, err := clusterSelectorOf(mo)
	if err != nil {
		s.fail(movev1alpha1.ReasonInvalidSelector, fmt.Sprintf("spec.clusterSelector is not a valid label selector: %v", err))
		return ctrl.Result{}, nil
	}
	if _, err := controllerSelectorOf(mo); err != nil {
		s.fail(movev1alpha1.ReasonInvalidSelector, fmt.Sprintf("spec.controllers.selector is not a valid label selector: %v", err))
		return ctrl.Result{}, nil
	}
	for _, ns := range mo.Spec.Namespaces {
		if err := r.Source.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}); err != nil {
			if apierrors.IsNotFound(err) {
				s.fail(movev1alpha1.ReasonNamespaceNotFound, fmt.Sprintf("namespace %q in spec.namespaces does not exist in the source cluster; create a MoveOperation listing existing namespaces", ns))
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("getting namespace %s: %w", ns, err)
		}
	}

	target, res, ok := r.target(ctx, s, true)
	if !ok {
		return res, nil
	}
	same, err := remote.SameCluster(ctx, r.Source, target.Client)
	if err != nil {
		s.stalled = &stall{reason: movev1alpha1.ReasonTargetUnreachable, message: fmt.Sprintf(
			"the target API server %s does not answer: %v; check the kubeconfig Secret and the network (retrying)", target.Server, err)}
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if same {
		s.fail(movev1alpha1.ReasonTargetIsSource, fmt.Sprintf(
			"the kubeconfig points at the source cluster itself (%s): a move onto itself would delete what it copied; point it at the target cluster", target.Server))
		return ctrl.Result{}, nil
	}

	sourceTypes, err := graph.DiscoverTypes(ctx, r.Source)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("discovering the kinds to move in the source: %w", err)
	}
	targetTypes, err := graph.DiscoverTypes(ctx, target.Client)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("discovering the kinds to move in the target: %w", err)
	}
	if err := preflight.CheckCRDs(sourceTypes, targetTypes); err != nil {
		s.fail(movev1alpha1.ReasonCRDMismatch, err.Error())
		return ctrl.Result{}, nil
	}
	if err := preflight.CheckProviders(ctx, r.Source, target.Client); err != nil {
		var mismatch *preflight.ProviderMismatch
		if !errors.As(err, &mismatch) {
			return ctrl.Result{}, fmt.Errorf("reading the installed providers: %w", err)
		}
		s.fail(movev1alpha1.ReasonProviderMissing, err.Error())
		return ctrl.Result{}, nil
	}
	managerNotes, failed, err := r.checkManagers(ctx, s, target)
	if err != nil || failed {
		return ctrl.Result{}, err
	}

	g, err := graph.Discover(ctx, r.Source, sourceTypes, graph.DiscoverOptions{Namespaces: mo.Spec.Namespaces})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the objects to move: %w", err)
	}
	plan := g.Plan(graph.Selection{ClusterSelector: clusterSelector})
	// Shown even when a check below fails: what the move would take and
	// what it would leave out is what the user needs to decide.
	mo.Status.Plan = plan.Summary()
	if err := plan.Validate(); err != nil {
		s.fail(movev1alpha1.ReasonOrphanedObjects, err.Error()+"; move their owners too (widen spec.namespaces or spec.clusterSelector), or remove the objects")
		return ctrl.Result{}, nil
	}
	if paused := plan.PausedByOthers(string(mo.UID)); len(paused) > 0 {
		// Their pause is somebody's decision: they move paused, and stay
		// paused in the target (or, after a rollback, in the source).
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"%s were paused before the move: they move paused and stay paused; unpause them in the target when you want their controllers to act", joinRefs(paused)))
	}
	if err := move.CheckProvisioned(ctx, r.Source, plan); err != nil {
		s.fail(movev1alpha1.ReasonNotProvisioned, err.Error()+"; wait for the clusters to finish provisioning, then create a new MoveOperation")
		return ctrl.Result{}, nil
	}
	targetID, err := remote.ClusterID(ctx, target.Client)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("target cluster: %w", err)
	}
	inTarget, err := preflight.CheckTarget(ctx, r.Source, target.Client, targetID, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(inTarget.Conflicts) > 0 {
		s.fail(movev1alpha1.ReasonTargetConflict, fmt.Sprintf(
			"%s already exist in the target and were not created by this move; delete them there or leave their clusters out of the move", joinRefs(inTarget.Conflicts)))
		return ctrl.Result{}, nil
	}

	// GitOps managers of the moved objects: see gitops.go.
	if stop, err := r.validateGitOps(ctx, s, plan); stop || err != nil {
		return ctrl.Result{}, err
	}

	for _, c := range []struct {
		role movev1alpha1.ClusterRole
		cl   client.Client
	}{{movev1alpha1.ClusterSource, r.Source}, {movev1alpha1.ClusterTarget, target.Client}} {
		wh, err := r.webhooksOf(ctx, s, c.cl, c.role)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, w := range wh.ByURL {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s cluster: %s is given by URL and cannot be bypassed; it must accept the moved objects while their controllers are down", c.role, w))
		}
	}
	plan.Warnings = append(plan.Warnings, managerNotes...)
	warnings, err := r.accessWarnings(ctx, target)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, w := range warnings {
		plan.Warnings = append(plan.Warnings, w.message)
		r.event(mo, "Warning", w.reason, string(movev1alpha1.PhaseValidating), w.message)
	}
	mo.Status.Plan = plan.Summary()
	mo.Status.Plan.GitOps = s.gitOps
	mo.Status.Progress = &movev1alpha1.MoveProgress{Total: int32(plan.Len())}
	r.runFor(mo.UID).reset()

	if mo.Spec.DryRun {
		s.enter(movev1alpha1.PhaseDone)
		return ctrl.Result{}, nil
	}
	s.enter(movev1alpha1.PhaseRecording)
	return ctrl.Result{}, nil
}

type warning struct{ reason, message string }

// accessWarnings says what in the way the operator reaches the clusters a
// user should know, without stopping the move: a target whose certificate is
// not verified, and identities that others may share (every request made
// with the operator's identity skips the stopped providers' webhooks).
func (r *MoveOperationReconciler) accessWarnings(ctx context.Context, target *remote.Target) ([]warning, error) {
	var out []warning
	if target.Insecure {
		out = append(out, warning{movev1alpha1.ReasonInsecureTarget, fmt.Sprintf(
			"the target kubeconfig sets insecure-skip-tls-verify: the operator does not verify that %s is the target, so whoever answers there receives the moved Secrets; put the target's CA in certificate-authority-data", target.Server)})
	}
	for _, c := range r.clusters(target) {
		who, err := quiesce.WhoAmI(ctx, c.client)
		if err != nil {
			return nil, fmt.Errorf("%s cluster: %w", c.role, err)
		}
		if who.Shared() {
			out = append(out, warning{movev1alpha1.ReasonSharedIdentity, fmt.Sprintf(
				"%s cluster: the operator acts as %q, which is not a ServiceAccount; while the move runs every request made as %q skips the stopped providers' webhooks, so anyone else using it can write objects they would refuse; give the operator a dedicated ServiceAccount there",
				c.role, who.Username, who.Username)})
		}
	}
	return out, nil
}

// reconcileRecording saves the replica count of every controller in both
// clusters, on the Deployments (never overwriting) and in status.
func (r *MoveOperationReconciler) reconcileRecording(ctx context.Context, s *scope) (ctrl.Result, error) {
	target, res, ok := r.target(ctx, s, false)
	if !ok {
		return res, nil
	}
	// From the first write on, the move needs the target until it has
	// settled, also to roll back: the Secret must outlive a deletion of its
	// namespace (which also deletes the MoveOperation) until then.
	if err := r.holdSecret(ctx, s.mo); err != nil {
		return ctrl.Result{}, err
	}
	// GitOps managers stop before anything else changes in the source
	// (spec.gitOps: Suspend): see gitops.go.
	if err := r.suspendGitOps(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	var recorded []movev1alpha1.RecordedController
	for _, c := range r.clusters(target) {
		controllers, err := r.selectControllers(ctx, s, c.client, c.role)
		if err != nil {
			return ctrl.Result{}, err
		}
		done, err := quiesce.Record(ctx, c.client, controllers)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("%s cluster: %w", c.role, err)
		}
		for _, d := range done {
			recorded = append(recorded, movev1alpha1.RecordedController{
				Cluster: c.role, Namespace: d.Key.Namespace, Name: d.Key.Name, OriginalReplicas: ptr.Deref(d.Recorded, d.Replicas), Manager: d.Manager,
			})
		}
	}
	s.mo.Status.Controllers = recorded
	s.enter(movev1alpha1.PhaseScalingDown)
	return ctrl.Result{}, nil
}

// reconcileScalingDown installs the webhook bypass, pauses what moves, waits
// for block-move to clear and stops every controller in both
// clusters. Each step is idempotent; the phase repeats them until the last
// controller pod is gone. An error that persists past both of the phase's
// timeouts (block-move and scale-down) rolls the move back: before the point
// of no return no retry may go on for ever with the providers stopped.
func (r *MoveOperationReconciler) reconcileScalingDown(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, err := r.scaleDown(ctx, s)
	if err == nil {
		return res, nil
	}
	bound := durationOr(s.mo.Spec.Timeouts.BlockMove, 10*time.Minute) + durationOr(s.mo.Spec.Timeouts.ScaleDown, 5*time.Minute)
	if time.Since(s.phaseStarted()) > bound {
		s.fail(movev1alpha1.ReasonScaleDownTimeout, fmt.Sprintf(
			"ScalingDown still failed after %s (spec.timeouts.blockMove + spec.timeouts.scaleDown); the move is rolled back: %v", bound, err))
		return ctrl.Result{}, nil
	}
	return res, err
}

func (r *MoveOperationReconciler) scaleDown(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	target, res, ok := r.target(ctx, s, false)
	if !ok {
		return res, nil
	}
	run := r.runFor(mo.UID)
	if !run.bypassed {
		// First of all, before any write to a Cluster API object: a provider
		// that is down already (scaled to zero before the move) refuses the
		// pause otherwise, and would strand the move here.
		if err := r.installBypass(ctx, s, target); err != nil {
			return ctrl.Result{}, err
		}
		run.bypassed = true
	}
	if run.pausePlan == nil {
		plan, err := r.buildPlan(ctx, mo)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := move.Pause(ctx, r.Source, plan, string(mo.UID), r.Move); err != nil {
			return ctrl.Result{}, err
		}
		run.pausePlan = plan
	}
	plan := run.pausePlan

	if !run.unblocked {
		blockers, err := move.Blockers(ctx, r.Source, plan)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(blockers) > 0 {
			timeout := durationOr(mo.Spec.Timeouts.BlockMove, 10*time.Minute)
			msg := fmt.Sprintf("%s carry the %s annotation: their providers are finishing work that must not be interrupted", joinRefs(blockers), graph.BlockMoveAnnotation)
			if time.Since(s.phaseStarted()) > timeout {
				s.fail(movev1alpha1.ReasonBlockMoveTimeout, fmt.Sprintf("%s, still after %s (spec.timeouts.blockMove)", msg, timeout))
				return ctrl.Result{}, nil
			}
			s.waiting = "waiting: " + msg
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		run.unblocked = true
	}

	// The managers first (cluster-api-operator, spec.controllers.additional).
	remaining, err := r.stopControllers(ctx, s, target)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(remaining) > 0 {
		timeout := durationOr(mo.Spec.Timeouts.ScaleDown, 5*time.Minute)
		msg := fmt.Sprintf("controller pods still running: %s", formatCounts(remaining))
		if time.Since(s.phaseStarted()) > timeout {
			s.fail(movev1alpha1.ReasonScaleDownTimeout, fmt.Sprintf("%s after %s (spec.timeouts.scaleDown)", msg, timeout))
			return ctrl.Result{}, nil
		}
		s.waiting = "waiting: " + msg
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	}
	s.enter(movev1alpha1.PhaseCopying)
	return ctrl.Result{}, nil
}

// reconcileCopying creates the objects in the target, one creation group per
// reconcile so that progress is written after each group. The plan is
// recorded before the first copy (see recordPlan): a restarted operator
// copies exactly that set again. After the last group the source is read
// once more, and a moved set that changed meanwhile (an object created or
// deleted in a moved hierarchy by a writer the move does not stop) fails
// the move, before its point of no return.
//
// An error that persists (the record of the plan cannot be written, the
// source cannot be read again) rolls the move back once Copying has made no
// progress for spec.timeouts.copy, as a failing copy does: before the point
// of no return no retry may go on for ever with the providers stopped.
func (r *MoveOperationReconciler) reconcileCopying(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, err := r.copying(ctx, s)
	if err == nil {
		return res, nil
	}
	timeout := durationOr(s.mo.Spec.Timeouts.Copy, 10*time.Minute)
	since := s.phaseStarted()
	if p := s.mo.Status.Progress; p != nil && p.LastProgressTime != nil && p.LastProgressTime.After(since) {
		since = p.LastProgressTime.Time
	}
	if time.Since(since) > timeout {
		s.fail(movev1alpha1.ReasonCopyTimeout, fmt.Sprintf(
			"Copying made no progress for %s (spec.timeouts.copy); the move is rolled back: %v", timeout, err))
		return ctrl.Result{}, nil
	}
	return res, err
}

func (r *MoveOperationReconciler) copying(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	target, res, ok := r.target(ctx, s, false)
	if !ok {
		return res, nil
	}
	run := r.runFor(mo.UID)
	if run.copyPlan == nil {
		plan, conflicts, err := r.recordPlan(ctx, mo, target)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(conflicts) > 0 {
			s.fail(movev1alpha1.ReasonTargetConflict, fmt.Sprintf(
				"%s appeared in the target since the move validated, and were not created by it; the move is rolled back: delete them there or leave their clusters out of the move", joinRefs(conflicts)))
			return ctrl.Result{}, nil
		}
		targetID, err := remote.ClusterID(ctx, target.Client)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("target cluster: %w", err)
		}
		copies, err := planrecord.LoadCopies(ctx, r.Source, mo.Namespace, mo.UID)
		if err != nil {
			return ctrl.Result{}, err
		}
		run.copyPlan = plan
		run.copier = move.NewCopier(r.Source, target.Client, plan, string(mo.UID), r.Move).RecognizeCopiesIn(targetID).
			WithCopies(copies).
			OnCopied(func(ctx context.Context, group int, uids []types.UID) error {
				return planrecord.SaveCopies(ctx, r.Source, mo, group, uids)
			})
		// After a restart every group is copied again: what is already
		// there, this move's copy, counts as progress.
		run.nextCopy, run.verified = 0, false
	}
	plan := run.copyPlan
	progress := progressOf(mo, plan)
	// Progress is derived from the run on every reconcile, never added to:
	// a status write lost to a conflict is then made good by the next one.
	setCopyProgress(progress, plan, run.nextCopy)
	if run.nextCopy < len(plan.Groups) {
		if _, err := run.copier.CopyGroup(ctx, run.nextCopy); err != nil {
			var conflict *move.ConflictError
			if errors.As(err, &conflict) {
				s.fail(movev1alpha1.ReasonTargetConflict, fmt.Sprintf("%s; the move is rolled back: delete it from the target or leave its cluster out of the move", conflict.Error()))
				return ctrl.Result{}, nil
			}
			timeout := durationOr(mo.Spec.Timeouts.Copy, 10*time.Minute)
			since := s.phaseStarted()
			if progress.LastProgressTime != nil && progress.LastProgressTime.After(since) {
				since = progress.LastProgressTime.Time
			}
			if time.Since(since) > timeout {
				s.fail(movev1alpha1.ReasonCopyTimeout, fmt.Sprintf("no progress copying to the target %s for %s (spec.timeouts.copy): %v", target.Server, timeout, err))
				return ctrl.Result{}, nil
			}
			s.waiting = fmt.Sprintf("copying group %d of %d to the target %s failed, retrying; the move rolls back if it makes no progress by %s: %v",
				run.nextCopy+1, len(plan.Groups), target.Server, since.Add(timeout).UTC().Format(time.RFC3339), err)
			log.FromContext(ctx).Info("copy failed, retrying", "group", run.nextCopy+1, "error", err.Error())
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		run.nextCopy++
		setCopyProgress(progress, plan, run.nextCopy)
		progress.LastProgressTime = ptrTime(time.Now())
		objectsCopied.Add(float64(len(plan.Groups[run.nextCopy-1])))
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if !run.verified {
		changed, err := r.movedSetChanged(ctx, mo, plan)
		if err != nil {
			return ctrl.Result{}, err
		}
		if changed != "" {
			s.fail(movev1alpha1.ReasonObjectsChanged, changed+"; the move is rolled back: stop whatever writes them and create a new MoveOperation")
			return ctrl.Result{}, nil
		}
		run.verified = true
	}
	// The last chance to roll back: nothing deletes with a provider running.
	if failed, err := r.checkStillStopped(ctx, s, target); failed || err != nil {
		return ctrl.Result{}, err
	}
	s.enter(movev1alpha1.PhaseDeleting)
	return ctrl.Result{}, nil
}

// reconcileDeleting deletes the moved objects from the source, last group
// first. This is the point of no return: errors are retried, never rolled back.
func (r *MoveOperationReconciler) reconcileDeleting(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	run := r.runFor(mo.UID)
	if run.deletePlan == nil {
		if run.copyPlan != nil && run.nextCopy == len(run.copyPlan.Groups) {
			// This process copied every group of this plan just now, and
			// nothing has written to the source since: its controllers
			// are stopped and the copy only reads it. Reading every kind
			// again would find the same objects.
			run.deletePlan = run.copyPlan
		} else {
			// After a restart: the recorded plan. The objects already
			// deleted are gone, which DeleteGroup counts as progress.
			plan, err := r.recordedPlan(ctx, mo)
			if errors.Is(err, errNoRecord) {
				// Past the point of no return the move goes on: it
				// deletes, of what the rules move now, only the objects
				// whose copy the target holds.
				plan, err = r.planOfCopies(ctx, s)
			}
			if err != nil {
				return ctrl.Result{}, err
			}
			run.deletePlan = plan
		}
		run.copier = nil
		run.nextDelete = len(run.deletePlan.Groups) - 1
		// What the status counted before this plan (a restart rebuilds it
		// from what is left in the source): the run counts on from there.
		p := progressOf(mo, run.deletePlan)
		run.deletedBefore, run.deletedGroupsBefore = p.Deleted, p.DeletedGroups
		run.deleted, run.deletedGroups = 0, 0
	}
	plan := run.deletePlan
	progress := progressOf(mo, plan)
	progress.Deleted = run.deletedBefore + run.deleted
	progress.DeletedGroups = run.deletedGroupsBefore + run.deletedGroups
	if run.nextDelete >= 0 {
		result, err := move.DeleteGroup(ctx, r.Source, plan, run.nextDelete, r.Move)
		if err != nil {
			s.waiting = fmt.Sprintf("deleting group %d from the source failed, retrying (past the point of no return the move only goes forward): %v", run.nextDelete+1, err)
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		run.nextDelete--
		run.deleted += int32(result.Deleted + result.Gone)
		run.deletedGroups++
		progress.Deleted = run.deletedBefore + run.deleted
		progress.DeletedGroups = run.deletedGroupsBefore + run.deletedGroups
		progress.LastProgressTime = ptrTime(time.Now())
		objectsDeleted.Add(float64(result.Deleted))
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	s.enter(movev1alpha1.PhaseRestoringTarget)
	return ctrl.Result{}, nil
}

// reconcileRestoringTarget brings the target's controllers back, then
// removes the bypass, checks the moved objects with the target's webhooks
// (spec.targetValidation) and unpauses what moved. When that takes
// longer than spec.timeouts.scaleUp (the target is away, or its controllers
// do not become Available), the source's controllers come back meanwhile:
// the source holds only what stays there, and what stays (other Clusters,
// among them) must not go unmanaged for as long as the target is away.
func (r *MoveOperationReconciler) reconcileRestoringTarget(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, done, err := r.restoreTarget(ctx, s)
	if done && err == nil {
		s.enter(movev1alpha1.PhaseRestoringSource)
		return ctrl.Result{}, nil
	}
	if time.Since(s.phaseStarted()) > durationOr(s.mo.Spec.Timeouts.ScaleUp, 10*time.Minute) {
		if serr := r.restartSourceControllers(ctx, s); serr != nil {
			err = kerrors.NewAggregate([]error{err, serr})
		}
	}
	return res, err
}

func (r *MoveOperationReconciler) restoreTarget(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	target, res, ok := r.target(ctx, s, false)
	if !ok {
		return res, false, nil
	}
	return r.restore(ctx, s, target.Client, movev1alpha1.ClusterTarget, true, nil)
}

// restartSourceControllers scales the source's controllers back to their
// recorded replicas, and nothing else: pauses and the bypass wait
// for RestoringSource, which finishes the source's restore (idempotently).
func (r *MoveOperationReconciler) restartSourceControllers(ctx context.Context, s *scope) error {
	controllers, err := r.controllersToRestore(ctx, s, r.Source, movev1alpha1.ClusterSource)
	if err != nil {
		return err
	}
	if _, _, err := restartInOrder(ctx, r.Source, controllers, ptr.Deref(s.mo.Spec.Controllers.FallbackReplicas, 1)); err != nil {
		return fmt.Errorf("source cluster: %w", err)
	}
	return nil
}

// reconcileRestoringSource brings the source's controllers back, and records
// on what stays in the source the copies made of it, so that a later move
// of those objects recognises them.
//
// The target is asked for only when the copies are recorded, after the
// source's controllers run again: they never wait for it.
func (r *MoveOperationReconciler) reconcileRestoringSource(ctx context.Context, s *scope) (ctrl.Result, error) {
	copiesIn := func(ctx context.Context) (*remote.Target, ctrl.Result, bool) { return r.target(ctx, s, false) }
	if res, done, err := r.restore(ctx, s, r.Source, movev1alpha1.ClusterSource, true, copiesIn); !done || err != nil {
		return res, err
	}
	s.enter(movev1alpha1.PhaseDone)
	return ctrl.Result{}, nil
}

// reconcileRollingBack undoes a move that failed before the point of no
// return. The source comes back first: it still holds every object as before
// the move, and its controllers must not wait for a target that may be away
// for long, or for good. Then what the move created in the target goes, and
// the target's controllers come back.
func (r *MoveOperationReconciler) reconcileRollingBack(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	run := r.runFor(mo.UID)
	if !run.sourceRestored {
		if res, done, err := r.restore(ctx, s, r.Source, movev1alpha1.ClusterSource, true, nil); !done || err != nil {
			return res, err
		}
		// Once the source holds again all it held, its GitOps managers may
		// apply it again: see gitops.go.
		if err := r.resumeGitOps(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		run.sourceRestored = true
	}
	target, res, ok := r.target(ctx, s, false)
	if !ok {
		return res, nil
	}
	if !run.targetCleared {
		plan := run.copyPlan
		if plan == nil {
			// A restarted operator reads the recorded plan back. None
			// means the move failed before it copied anything.
			recorded, found, err := planrecord.Load(ctx, r.Source, mo.Namespace, mo.UID)
			if err != nil {
				s.waiting = fmt.Sprintf("the source is restored; cannot read the record of the plan to delete what the move created in the target, retrying: %v", err)
				return ctrl.Result{RequeueAfter: r.PollInterval}, nil
			}
			if !found {
				recorded = graph.NewPlan(nil)
			}
			plan = recorded
			run.copyPlan = plan
		}
		targetTypes, err := graph.DiscoverTypes(ctx, target.Client)
		if err != nil {
			s.waiting = fmt.Sprintf("the source is restored; cannot read the target %s to delete what the move created there, retrying: %v", target.Server, err)
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		copies, err := planrecord.LoadCopies(ctx, r.Source, mo.Namespace, mo.UID)
		if err != nil {
			s.waiting = fmt.Sprintf("the source is restored; cannot read the record of the copies to delete what the move created in the target, retrying: %v", err)
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		if _, err := move.Rollback(ctx, target.Client, targetTypes, plan, string(mo.UID), copies, r.Move); err != nil {
			s.waiting = fmt.Sprintf("the source is restored; deleting what the move created in the target %s failed, retrying: %v", target.Server, err)
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
		run.targetCleared = true
	}
	if res, done, err := r.restore(ctx, s, target.Client, movev1alpha1.ClusterTarget, false, nil); !done || err != nil {
		return res, err
	}
	s.enter(movev1alpha1.PhaseFailed)
	return ctrl.Result{}, nil
}

// restore brings one cluster's controllers back to their recorded replicas,
// waits until they are Available, removes the webhook bypass, and, when
// finish is set, unpauses what this move paused (recording first, when
// copiesIn is given, which copy there each object the move kept has; in
// the target after a move, checking the moved objects with its webhooks);
// last it forgets the recorded replicas. It reports done=false while it
// waits.
func (r *MoveOperationReconciler) restore(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole, finish bool,
	copiesIn func(context.Context) (*remote.Target, ctrl.Result, bool)) (ctrl.Result, bool, error) {
	mo := s.mo
	controllers, err := r.controllersToRestore(ctx, s, c, role)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	fallback := ptr.Deref(mo.Spec.Controllers.FallbackReplicas, 1)
	// The providers first, their managers once the providers are Available.
	restored, unavailable, err := restartInOrder(ctx, c, controllers, fallback)
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("%s cluster: %w", role, err)
	}
	if len(unavailable) > 0 {
		timeout := durationOr(mo.Spec.Timeouts.ScaleUp, 10*time.Minute)
		msg := fmt.Sprintf("%s controllers not yet Available: %s", role, formatReasons(unavailable))
		if time.Since(s.phaseStarted()) > timeout {
			// Past the point of no return nothing can be undone: keep
			// waiting, and ask for a human.
			s.stalled = &stall{reason: movev1alpha1.ReasonScaleUpTimeout, message: fmt.Sprintf(
				"%s after %s (spec.timeouts.scaleUp); check those Deployments' pods; the move goes on once they are Available", msg, timeout)}
		} else {
			s.waiting = "waiting: " + msg
		}
		return ctrl.Result{RequeueAfter: r.PollInterval}, false, nil
	}
	// The webhooks of the providers running again check what follows; those
	// of a provider that stays at zero (as the user left it) are down, and
	// keep letting the operator through until the last step.
	if err := r.removeBypassOfRunning(ctx, c, role, restored); err != nil {
		return ctrl.Result{}, false, err
	}
	if finish {
		ts, err := graph.DiscoverTypes(ctx, c)
		if err != nil {
			return ctrl.Result{}, false, fmt.Errorf("%s cluster: %w", role, err)
		}
		if copiesIn != nil {
			target, res, ok := copiesIn(ctx)
			if !ok {
				return res, false, nil
			}
			targetID, err := remote.ClusterID(ctx, target.Client)
			if err != nil {
				return ctrl.Result{}, false, fmt.Errorf("target cluster: %w", err)
			}
			plan, err := r.recordedPlan(ctx, mo)
			switch {
			case errors.Is(err, errNoRecord):
				// Past the point of no return: what is kept is not noted,
				// and a later move of it finds its copy as a conflict.
				log.FromContext(ctx).Info("not noting the copies of what the source keeps", "reason", err.Error())
			case err != nil:
				return ctrl.Result{}, false, err
			default:
				if _, err := move.RecordCopies(ctx, c, target.Client, targetID, plan, r.Move); err != nil {
					return ctrl.Result{}, false, fmt.Errorf("%s cluster: %w", role, err)
				}
			}
		}
		if role == movev1alpha1.ClusterTarget && s.mo.Status.Phase == movev1alpha1.PhaseRestoringTarget {
			r.validateInTarget(ctx, s, c)
		}
		if _, err := move.Unpause(ctx, c, ts, string(mo.UID), r.Move); err != nil {
			return ctrl.Result{}, false, fmt.Errorf("%s cluster: %w", role, err)
		}
	}
	if err := quiesce.RemoveBypass(ctx, c); err != nil {
		return ctrl.Result{}, false, fmt.Errorf("%s cluster: %w", role, err)
	}
	if err := quiesce.Forget(ctx, c, controllers); err != nil {
		return ctrl.Result{}, false, fmt.Errorf("%s cluster: %w", role, err)
	}
	return ctrl.Result{}, true, nil
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
		if err := quiesce.InstallBypass(ctx, c.client, wh.Served, who.Username); err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
	}
	return nil
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
// wrong, it reports why and asks to be called again later (ok=false); in
// Validating that stalls the move, later it is waited for.
func (r *MoveOperationReconciler) target(ctx context.Context, s *scope, validating bool) (*remote.Target, ctrl.Result, bool) {
	t, err := r.Targets.Get(ctx, s.mo.Namespace, s.mo.Spec.Target.KubeconfigSecretRef)
	if err == nil {
		return t, ctrl.Result{}, true
	}
	var re *remote.Error
	if errors.As(err, &re) {
		if validating || s.mo.Status.Phase == movev1alpha1.PhaseRollingBack {
			s.stalled = &stall{reason: re.Reason, message: re.Message}
		} else {
			s.waiting = fmt.Sprintf("cannot reach the target: %s", re.Message)
		}
		return nil, ctrl.Result{RequeueAfter: 10 * time.Second}, false
	}
	s.waiting = fmt.Sprintf("cannot reach the target: %v", err)
	return nil, ctrl.Result{RequeueAfter: r.PollInterval}, false
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

func durationOr(d *metav1.Duration, fallback time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return fallback
	}
	return d.Duration
}

// joinRefs names objects for a message, the first ten of them.
func joinRefs(refs []graph.ObjectRef) string {
	names := make([]string, 0, len(refs))
	for i, ref := range refs {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-10))
			break
		}
		names = append(names, ref.String())
	}
	return strings.Join(names, ", ")
}

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
