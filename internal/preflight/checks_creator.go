package preflight

import (
	"context"
	"errors"
	"fmt"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
)

// The operator is a deputy: a MoveOperation directs the operator's rights,
// so the move is held to its creator's (package creator). These checks
// run first, before anything the move is about is read, and a finding of
// theirs ends the checks: a creator refused learns nothing of what the
// move would have found.

// checkCreatorPolicy makes sure the admission policy that checked the
// creator, and wrote who they are, is installed as shipped and older than
// the MoveOperation: without it anyone who may create a MoveOperation
// could name anyone as its creator.
func checkCreatorPolicy(ctx context.Context, e *Env) error {
	err := creator.Verify(ctx, e.Source, e.CreatorPolicy, e.Object.GetCreationTimestamp())
	if err == nil {
		return nil
	}
	var problem *creator.PolicyProblem
	if !errors.As(err, &problem) {
		return fmt.Errorf("reading the admission policy %s: %w", e.CreatorPolicy, err)
	}
	e.refuseCreator(movev1alpha1.ReasonAdmissionPolicyMissing, err.Error())
	return nil
}

// checkCreator asks, for the creator, what the spec has the operator do
// on their behalf: the admission policy's questions, asked again (a
// policy that was changed and put back, a check it could not make).
func checkCreator(ctx context.Context, e *Env) error {
	user, err := creator.Of(e.Object)
	if err != nil {
		e.refuseCreator(movev1alpha1.ReasonCreatorUnknown, err.Error()+"; the installer's admission policies write it (see docs/access.md)")
		return nil
	}
	e.creator = &user
	return e.refuseIf(creator.Ask(ctx, e.Source, user, creator.SpecNeeds(e.Spec, e.Namespace), false))
}

// checkCreatorPlan asks, for the creator, what the plan needs: every
// object that leaves for the target is read, every object deleted from the
// source is deleted, wherever the graph found them.
func checkCreatorPlan(ctx context.Context, e *Env) error {
	if e.Plan == nil || e.creator == nil {
		return nil
	}
	return e.refuseIf(creator.AskPlan(ctx, e.Source, *e.creator, e.Plan))
}

// refuseIf records the creator's refusal, if there is one.
func (e *Env) refuseIf(refusal string, err error) error {
	if err != nil {
		return err
	}
	if refusal != "" {
		e.refuseCreator(movev1alpha1.ReasonCreatorNotAllowed, refusal)
	}
	return nil
}

// refuseCreator records a finding that ends the checks, and forgets the
// plan and the kinds' versions: what the source holds, down to which kinds
// it serves, is not shown to someone who may not see it.
func (e *Env) refuseCreator(reason, message string) {
	e.find(reason, message)
	e.creatorRefused = true
	e.Plan = nil
	e.GitOps = nil
	e.KindVersions = nil
}
