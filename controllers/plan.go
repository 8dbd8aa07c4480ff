package controllers

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planner"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// buildPlan reads the source and plans the move of mo's selection
// (package planner, the one place a move's plan is built).
func (r *MoveOperationReconciler) buildPlan(ctx context.Context, mo *movev1alpha1.MoveOperation) (*graph.Plan, error) {
	sel, err := planner.SelectionOf(mo.Spec)
	if err != nil {
		return nil, err
	}
	return r.planSource().Plan(ctx, sel, nil)
}

// planSource is the source cluster, as package planner reads it.
func (r *MoveOperationReconciler) planSource() planner.Source {
	return planner.Source{Reader: r.Source, Types: &r.sourceTypes}
}

// recordPlan returns the plan Copying creates: the recorded one when there
// is one (a restarted operator), otherwise the plan of the source as it is
// now, with the versions Validating decided the target takes each kind at
// (decideTargetVersions), recorded before anything is copied. Now is after
// the providers of both clusters are gone and only the operator gets past their webhooks:
// the set can no longer grow by their objects. The creator is asked again
// about that plan, which may hold objects the plan Validating checked did
// not. The target is checked again at that moment; what it holds already
// is marked as found (used as is, never rolled back). A creator refused,
// or objects that appeared in the target since Validating under a moved
// name, fail the move with nothing recorded (an outcome that is not done).
func (r *MoveOperationReconciler) recordPlan(ctx context.Context, s *scope, target *remote.Target) (*graph.Plan, outcome, error) {
	mo := s.mo
	recorded, found, err := planrecord.Load(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil || found {
		return recorded, done(), err
	}
	plan, err := r.buildPlan(ctx, mo)
	if err != nil {
		return nil, outcome{}, err
	}
	if o, err := r.decideTargetVersions(ctx, mo, target, plan); err != nil || !o.isDone() {
		return nil, o, err
	}
	if o, err := r.askCreatorAgain(ctx, s, plan); err != nil || !o.isDone() {
		return nil, o, err
	}
	if o, err := r.checkGoingBackAgain(ctx, mo, target, plan); err != nil || !o.isDone() {
		return nil, o, err
	}
	targetID, err := remote.ClusterID(ctx, target.Client)
	if err != nil {
		return nil, outcome{}, fmt.Errorf("target cluster: %w", err)
	}
	inTarget, err := preflight.CheckTarget(ctx, r.Source, target.Client, targetID, plan)
	if err != nil {
		return nil, outcome{}, err
	}
	if len(inTarget.Conflicts) > 0 {
		return nil, failWith(movev1alpha1.ReasonTargetConflict, fmt.Sprintf(
			"%s appeared in the target since the move validated, and were not created by it; the move is rolled back: delete them there or leave their clusters out of the move", joinRefs(inTarget.Conflicts))), nil
	}
	for _, o := range plan.Objects() {
		o.FoundInTarget = inTarget.Found[o.UID]
	}
	if err := planrecord.Save(ctx, r.Source, mo, plan); err != nil {
		return nil, outcome{}, err
	}
	log.FromContext(ctx).Info("recorded the plan", "objects", plan.Len(), "groups", len(plan.Groups), "foundInTarget", len(inTarget.Found))
	return plan, done(), nil
}

func (r *MoveOperationReconciler) askCreatorAgain(ctx context.Context, s *scope, plan *graph.Plan) (outcome, error) {
	const rolledBack = "; the move is rolled back, nothing was copied"
	obj, refused, err := r.creatorObject(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	if refused != nil {
		return *refused, nil
	}
	if err := creator.Verify(ctx, r.Source, r.creatorPolicy(), obj.GetCreationTimestamp()); err != nil {
		var problem *creator.PolicyProblem
		if errors.As(err, &problem) {
			return failWith(movev1alpha1.ReasonAdmissionPolicyMissing, err.Error()+rolledBack), nil
		}
		return outcome{}, fmt.Errorf("reading the admission policy %s: %w", r.creatorPolicy(), err)
	}
	user, err := creator.Of(obj)
	if err != nil {
		return failWith(movev1alpha1.ReasonCreatorUnknown, err.Error()+rolledBack), nil
	}
	refusal, err := creator.AskPlan(ctx, r.Source, user, plan)
	if err != nil {
		return outcome{}, err
	}
	if refusal != "" {
		return failWith(movev1alpha1.ReasonCreatorNotAllowed, refusal+" (asked again of the source as Copying found it, after the move validated)"+rolledBack), nil
	}
	return done(), nil
}

// errNoRecord: the record of the plan is not there (somebody deleted it).
var errNoRecord = errors.New("the record of the plan is missing")

// recordedPlan reads the plan recorded when Copying began. Past that point
// the record is there, unless somebody deleted it: it goes only with the
// MoveOperation.
func (r *MoveOperationReconciler) recordedPlan(ctx context.Context, mo *movev1alpha1.MoveOperation) (*graph.Plan, error) {
	plan, found, err := planrecord.Load(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w (ConfigMaps labelled %s=%s in namespace %s)", errNoRecord, movev1alpha1.PlanOfLabel, mo.UID, mo.Namespace)
	}
	return plan, nil
}

// planOfCopies stands in for a lost record past the point of no return: the
// objects the rules move now whose copy the target holds. Objects without a
// copy stay in the source, so nothing is deleted that was not copied.
func (r *MoveOperationReconciler) planOfCopies(ctx context.Context, s *scope) (*graph.Plan, error) {
	target, o, err := r.target(ctx, s)
	if err != nil {
		return nil, err
	}
	if !o.isDone() {
		return nil, fmt.Errorf("the target is not reachable: %s", o.message)
	}
	plan, err := r.buildPlan(ctx, s.mo)
	if err != nil {
		return nil, err
	}
	// The record kept the versions the target stores the kinds at; so
	// does the status, as Validating decided them.
	versions := map[schema.GroupKind]string{}
	if s.mo.Status.Plan != nil {
		versions = targetVersionsOf(s.mo.Status.Plan.Versions)
	}
	plan.SetTargetVersions(versions)
	groups := make([][]*graph.Object, len(plan.Groups))
	var missing []graph.ObjectRef
	for i, g := range plan.Groups {
		for _, o := range g {
			copied := &metav1.PartialObjectMetadata{}
			copied.SetGroupVersionKind(plan.TargetGVK(o.GVK))
			err := target.Client.Get(ctx, o.Key(), copied)
			switch {
			case err == nil:
				groups[i] = append(groups[i], o)
			case apierrors.IsNotFound(err):
				missing = append(missing, o.ObjectRef)
			default:
				return nil, fmt.Errorf("reading %s in the target: %w", o.ObjectRef, err)
			}
		}
	}
	msg := "the record of the plan was deleted during the move; the move deletes from the source only the objects the rules select that have a copy in the target"
	if len(missing) > 0 {
		msg += fmt.Sprintf("; %s have none and stay in the source", joinRefs(missing))
	}
	log.FromContext(ctx).Info(msg)
	r.event(s.mo, "Warning", movev1alpha1.ReasonObjectsChanged, string(movev1alpha1.PhaseDeleting), msg)
	copied := graph.NewPlan(groups)
	copied.SetTargetVersions(versions)
	return copied, nil
}

// movedSetChanged reads the source again and reports, for a message, the
// objects that moved hierarchies gained or lost since the plan was
// recorded; "" when they hold the same objects. It compares the source's
// graph with the recorded plan without planning it again: a second plan
// beside the recorded one set a large move's peak memory.
func (r *MoveOperationReconciler) movedSetChanged(ctx context.Context, mo *movev1alpha1.MoveOperation, recorded *graph.Plan) (string, error) {
	sel, err := planner.SelectionOf(mo.Spec)
	if err != nil {
		return "", err
	}
	g, err := r.planSource().Read(ctx, sel, nil)
	if err != nil {
		return "", err
	}
	appeared, vanished := g.ChangesSince(recorded, sel.Rules())
	switch {
	case len(appeared) > 0 && len(vanished) > 0:
		return fmt.Sprintf("%s appeared and %s vanished in the source while the move copied", joinRefs(appeared), joinRefs(vanished)), nil
	case len(appeared) > 0:
		return fmt.Sprintf("%s appeared in the source while the move copied (created by a writer the move does not stop)", joinRefs(appeared)), nil
	case len(vanished) > 0:
		return fmt.Sprintf("%s vanished from the source while the move copied (deleted by a writer the move does not stop)", joinRefs(vanished)), nil
	}
	return "", nil
}
