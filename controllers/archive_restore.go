package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backup"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// A restore is a MoveOperation whose source is an archive
// (spec.source.archive), created in the cluster the fleet is restored
// into: that cluster is its target. It runs on the move's phase table:
// Validating reads the archive (its integrity, its key) and checks it
// against the cluster (every kind served, nothing in the way, the
// creator's right to create it all) before anything stops; Recording and
// ScalingDown stop the cluster's providers as a move stops a target's;
// Copying creates the archive's objects in creation order, owner UIDs
// rewired and statuses carried, the plan and the copies recorded as a
// move records them, so that a run after a crash finishes what the last
// began; RestoringTarget brings the providers back and unpauses what the
// backup paused; a failure before that deletes only what the restore
// created (RollingBack). There is no source cluster: Deleting and
// RestoringSource are skipped (routes, nextInRestore).

func init() {
	validatingPhase.restoreSteps = []subStep{{name: "check", do: (*MoveOperationReconciler).validateRestore}}
	recordingPhase.restoreSteps = []subStep{
		{name: "record the controllers", do: (*MoveOperationReconciler).recordControllers},
	}
	scalingDownPhase.restoreSteps = []subStep{
		{name: "bypass", once: true, do: (*MoveOperationReconciler).bypassStep},
		{name: "stop", do: (*MoveOperationReconciler).stopStep},
	}
	copyingPhase.restoreSteps = []subStep{
		{name: "count the run", finished: func(mem *memo) bool { return !mem.copyStarted.IsZero() }, do: (*MoveOperationReconciler).startCopyRun},
		{name: "record the plan", preamble: bothBypasses, finished: func(mem *memo) bool { return mem.copyPlan != nil }, do: (*MoveOperationReconciler).startRestoring},
		{name: "count the progress", do: (*MoveOperationReconciler).countCopyProgress},
		{name: "copy the next group", preamble: bothBypasses, finished: func(mem *memo) bool { return mem.nextCopy >= len(mem.copyPlan.Groups) }, do: (*MoveOperationReconciler).copyNextGroup},
		// Every object is copied: what comes after reads the plan's record
		// and the status, never the archive.
		{name: "let go of the archive", do: (*MoveOperationReconciler).releaseArchive},
		{name: "check still stopped", preamble: targetOnly, do: (*MoveOperationReconciler).checkStillStopped},
	}
	restoringTargetPhase.restoreSteps = []subStep{
		{name: "restore the target", preamble: bothBypasses, do: (*MoveOperationReconciler).restoreTarget},
	}
	rollingBackPhase.restoreSteps = []subStep{
		{name: targetCleared, preamble: bothBypasses, once: true, do: (*MoveOperationReconciler).clearTarget},
		{name: "restore the target", preamble: bothBypasses, do: (*MoveOperationReconciler).restoreTargetInRollback},
	}
}

// localTarget is the cluster the operator runs in, as a restore's target.
func (r *MoveOperationReconciler) localTarget() *remote.Target {
	r.localOnce.Do(func() {
		r.local = &remote.Target{Client: r.Source, Server: "the cluster the operator runs in", Local: true}
	})
	return r.local
}

// validateRestore checks a restore before anything is written: its
// creator's rights over the spec, the archive (readable, with the key
// given), the plan of it against this cluster (checkRestorePlan), the
// creator's right to create all of it, and the operator's. Every problem
// is named; those a human fixes outside the MoveOperation are waited for.
func (r *MoveOperationReconciler) validateRestore(ctx context.Context, s *scope) (outcome, error) {
	mo := s.mo
	obj, refused, err := r.creatorObject(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	if refused != nil {
		return *refused, nil
	}
	e := &preflight.Env{Object: obj, CreatorPolicy: r.creatorPolicy(), Source: r.Source, Spec: mo.Spec, UID: mo.UID, Namespace: mo.Namespace, ClaimNamespace: r.Claim.Namespace}
	if err := preflight.Evaluate(ctx, e, preflight.RestoreChecks()); err != nil {
		return outcome{}, err
	}
	if o, stop := verdict(e.Findings); stop {
		return o, nil
	}
	rs, finding, err := r.restoreOf(ctx, mo)
	if err != nil {
		return outcome{}, err
	}
	if finding != nil {
		finding.Check = "archive"
		o, _ := verdict([]preflight.Finding{*finding})
		return o, nil
	}
	if outside := namespacesNotNamed(rs.Archive, mo.Spec.Namespaces); len(outside) > 0 {
		return failWith(movev1alpha1.ReasonArchiveNotRestorable, fmt.Sprintf(
			"the archive was taken of namespaces %s, which spec.namespaces does not name; a restore restores the whole archive: name them too, or leave spec.namespaces out", strings.Join(outside, ", "))), nil
	}
	plan, kinds, failed, err := r.checkRestorePlan(ctx, s, obj, rs)
	if err != nil {
		return outcome{}, err
	}
	if failed != nil {
		return *failed, nil
	}
	missing, err := access.Check(ctx, map[movev1alpha1.ClusterRole]client.Client{movev1alpha1.ClusterTarget: r.Source},
		access.Needs(access.Move{TargetKinds: access.KindsOf(kinds), Namespace: mo.Namespace, ClaimNamespace: r.Claim.Namespace}), access.DefaultConcurrency)
	if err != nil {
		return outcome{}, fmt.Errorf("checking the operator's access: %w", err)
	}
	if len(missing) > 0 {
		return failWith(movev1alpha1.ReasonAccessDenied, "a restore's target is the cluster the operator runs in, where the operator creates what a move creates in a target: bind it the target's ClusterRole there "+
			"(kubectl apply -f dist/target-access.yaml, then kubectl create clusterrolebinding move-operator-restore --clusterrole=move-operator-target --serviceaccount=<the operator's namespace>:<its ServiceAccount>); "+
			access.Message(missing)), nil
	}
	mo.Status.Progress = &movev1alpha1.MoveProgress{Total: int32(plan.Len())}
	mo.Status.RestoredPausesOf = rs.Archive.Index.PausedBy
	if mo.Status.RestoredPausesOf == "" {
		mo.Status.RestoredPausesOf = string(mo.UID)
	}
	return done(), nil
}

// checkRestorePlan plans the archive against this cluster (every kind
// served, at a version the operator can write it at; nothing in the way)
// and asks whether the creator may create all of it. It returns the plan
// and the kinds this cluster serves, or the outcome that ends the restore.
// The plan and the versions go in the status, as a move's do, except to a
// creator refused: what the archive holds is not shown to someone who may
// not create it.
func (r *MoveOperationReconciler) checkRestorePlan(ctx context.Context, s *scope, obj metav1.Object, rs *backup.Restore) (*graph.Plan, *graph.Types, *outcome, error) {
	mo := s.mo
	fail := func(reason, message string) (*graph.Plan, *graph.Types, *outcome, error) {
		o := failWith(reason, message)
		return nil, nil, &o, nil
	}
	kinds, err := graph.DiscoverTypes(ctx, r.Source)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("discovering the kinds this cluster serves: %w", err)
	}
	status := &movev1alpha1.MovePlan{Versions: preflight.StatusOf(rs.Versions(kinds))}
	plan, err := rs.Plan(ctx, kinds)
	switch {
	case errors.Is(err, backup.ErrNotServed), errors.Is(err, backup.ErrNotRestorable):
		mo.Status.Plan = status
		return fail(movev1alpha1.ReasonArchiveNotRestorable, err.Error()+"; nothing was written")
	case err != nil:
		return nil, nil, nil, err
	}
	user, err := creator.Of(obj)
	if err != nil {
		return fail(movev1alpha1.ReasonCreatorUnknown, err.Error())
	}
	refusal, err := creator.AskRestore(ctx, r.Source, user, plan)
	if err != nil {
		return nil, nil, nil, err
	}
	if refusal != "" {
		return fail(movev1alpha1.ReasonCreatorNotAllowed, refusal)
	}
	mo.Status.Plan = plan.Summary()
	mo.Status.Plan.Versions = status.Versions
	err = rs.Check(ctx, plan)
	switch {
	case errors.Is(err, backup.ErrInTheWay):
		return fail(movev1alpha1.ReasonTargetConflict, err.Error()+"; nothing was written")
	case err != nil:
		return nil, nil, nil, err
	}
	return plan, kinds, nil, nil
}

// namespacesNotNamed returns the namespaces the archive was taken of (its
// backup's spec.namespaces; those of its objects when it names none) that
// named does not hold; none when named is empty (every namespace). Objects
// the backup's graph reached in other namespaces (an identity's
// credentials in a provider's namespace) come with them, as in a move: the
// creator's right to create them is asked of each (creator.AskRestore).
func namespacesNotNamed(a *archive.Archive, named []string) []string {
	if len(named) == 0 {
		return nil
	}
	taken := a.Index.Namespaces
	if len(taken) == 0 {
		for _, e := range a.Index.Objects {
			if e.Namespace != "" {
				taken = append(taken, e.Namespace)
			}
		}
	}
	var out []string
	for _, ns := range taken {
		if !slices.Contains(named, ns) && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// startRestoring records the restore's plan (or reads it back after a
// restart) and prepares the copier from the archive: the move's Copier,
// which carries statuses, recognises the copies an earlier run recorded,
// and records each group's as it goes, in this cluster.
func (r *MoveOperationReconciler) startRestoring(ctx context.Context, s *scope) (outcome, error) {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	rs, finding, err := r.restoreOf(ctx, mo)
	if err != nil {
		return outcome{}, err
	}
	if finding != nil {
		return outcome{}, fmt.Errorf("%s (changed since the restore validated)", finding.Message)
	}
	kinds, err := graph.DiscoverTypes(ctx, r.Source)
	if err != nil {
		return outcome{}, err
	}
	plan, found, err := planrecord.Load(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return outcome{}, err
	}
	if !found {
		if plan, err = rs.Plan(ctx, kinds); err != nil {
			return outcome{}, err
		}
		if err := planrecord.Save(ctx, r.Source, mo, plan); err != nil {
			return outcome{}, err
		}
	}
	copies, err := planrecord.LoadCopies(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return outcome{}, err
	}
	rs.Copies = copies
	rs.OnCopied = func(ctx context.Context, group int, uids []types.UID) error {
		return planrecord.SaveCopies(ctx, r.Source, mo, group, uids)
	}
	mem.copyPlan, mem.copier, mem.nextCopy = plan, rs.Copier(plan, kinds), 0
	return done(), nil
}

// pausedByOf is the operation whose pauses a restore's objects carry (the
// backup's, as the archive's index names it; this restore's for an
// archive clusterctl wrote), or, in a move, the move's own.
func (r *MoveOperationReconciler) pausedByOf(ctx context.Context, s *scope) (string, error) {
	if !s.mo.Spec.IsRestore() {
		return string(s.mo.UID), nil
	}
	if by := s.mo.Status.RestoredPausesOf; by != "" {
		return by, nil // recorded in Validating: the store may be away now
	}
	rs, finding, err := r.restoreOf(ctx, s.mo)
	if err != nil {
		return "", err
	}
	if finding != nil {
		return "", fmt.Errorf("reading the archive again for the pauses it resumes: %s", finding.Message)
	}
	if by := rs.Archive.Index.PausedBy; by != "" {
		return by, nil
	}
	return string(s.mo.UID), nil
}
