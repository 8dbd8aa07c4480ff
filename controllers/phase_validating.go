package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

var validatingPhase = phaseSpec{
	phase:     movev1alpha1.PhaseValidating,
	condition: movev1alpha1.ValidatedCondition,
	// One sub-step runs the preflight checks (internal/preflight) as a list
	// of their own: every check runs on every look, so that one reconcile
	// reports every finding at once, where sub-steps stop at the first
	// that does not finish.
	steps:               []subStep{{name: "check", do: (*MoveOperationReconciler).reconcileValidating}},
	stallsWithoutTarget: true,
}

// retryValidation is how soon Validating looks again at a problem a human
// fixes without changing the MoveOperation (the target's Secret, its
// reachability).
const retryValidation = 10 * time.Second

// reconcileValidating runs every preflight check (internal/preflight)
// before anything is written. A problem a human can fix without changing
// the MoveOperation is waited for; any other fails the move, naming every
// problem found, not only the first.
func (r *MoveOperationReconciler) reconcileValidating(ctx context.Context, s *scope) (outcome, error) {
	mo := s.mo
	obj, refused, err := r.creatorObject(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	if refused != nil {
		return *refused, nil
	}
	e := &preflight.Env{
		Object: obj, CreatorPolicy: r.creatorPolicy(), SourceTypesCache: &r.sourceTypes,
		Source: r.Source, Spec: mo.Spec, UID: mo.UID, Namespace: mo.Namespace, ClaimNamespace: r.Claim.Namespace,
		Connect: func(ctx context.Context) (*remote.Target, error) {
			return r.Targets.Get(ctx, mo.Namespace, mo.Spec.Target.KubeconfigSecretRef)
		},
	}
	checks := preflight.Checks()
	if mo.Spec.Target.IsBackup() {
		checks = preflight.BackupChecks()
	}
	if err := preflight.Evaluate(ctx, e, checks); err != nil {
		return outcome{}, err
	}
	if mo.Spec.Target.IsBackup() {
		found, err := r.checkArchive(ctx, mo)
		if err != nil {
			return outcome{}, err
		}
		e.Findings = append(e.Findings, found...)
	}
	if o, stop := verdict(e.Findings); stop {
		// Shown even when a check fails: what the move would take and
		// what it would leave out, and which kind the target refuses, is
		// what the user needs to decide.
		if p := planStatus(e); p != nil {
			mo.Status.Plan = p
		}
		return o, nil
	}

	notes, err := r.notes(ctx, s, e.Target)
	if err != nil {
		return outcome{}, err
	}
	for _, w := range append(e.Warnings, notes...) {
		e.Plan.Warnings = append(e.Plan.Warnings, w.Message)
		if w.Reason != "" {
			r.event(mo, "Warning", w.Reason, string(movev1alpha1.PhaseValidating), w.Message)
		}
	}
	// The versions in it are the decision Copying writes every object by
	// (see recordPlan).
	mo.Status.Plan = planStatus(e)
	mo.Status.Progress = &movev1alpha1.MoveProgress{Total: int32(e.Plan.Len())}
	r.memoOf(mo.UID).reset()
	return done(), nil
}

// planStatus is what the status shows of the checks' plan: what the move
// takes and leaves out, the GitOps managers it suspends, and the version
// each kind is read and written at; nil when the checks hold none (a
// creator refused is shown nothing of the source).
func planStatus(e *preflight.Env) *movev1alpha1.MovePlan {
	var p *movev1alpha1.MovePlan
	if e.Plan != nil {
		p = e.Plan.Summary()
		p.GitOps = e.GitOps
	}
	if e.KindVersions != nil {
		if p == nil {
			p = &movev1alpha1.MovePlan{}
		}
		p.Versions = preflight.StatusOf(e.KindVersions)
	}
	return p
}

// creatorPolicy is the admission policy that checks a MoveOperation's
// creator: the installer's unless told otherwise. Never none: a move is
// always held to its creator's rights.
func (r *MoveOperationReconciler) creatorPolicy() string {
	if r.CreatorPolicy != "" {
		return r.CreatorPolicy
	}
	return creator.PolicyName
}

// verdict turns the checks' findings into the phase's outcome: the first
// decides between waiting for a human (a fix outside the MoveOperation lets
// it go on) and failing; a failure names every finding.
func verdict(findings []preflight.Finding) (outcome, bool) {
	if len(findings) == 0 {
		return outcome{}, false
	}
	first := findings[0]
	if first.Retry {
		return stallOn(retryValidation, first.Reason, first.Message), true
	}
	messages := make([]string, 0, len(findings))
	for _, f := range findings {
		messages = append(messages, f.Message)
	}
	return failWith(first.Reason, strings.Join(messages, "; also: ")), true
}

// notes are what in the move's setup a user should know without it
// stopping the move: webhooks the bypass cannot cover, a target whose
// certificate is not verified, identities that others may share.
func (r *MoveOperationReconciler) notes(ctx context.Context, s *scope, target *remote.Target) ([]preflight.Warning, error) {
	var out []preflight.Warning
	for _, c := range r.clusters(target) {
		look, err := oneLook(s, c.client)
		if err != nil {
			return nil, err
		}
		wh, err := r.webhooksOf(ctx, s, look, c.role)
		if err != nil {
			return nil, err
		}
		for _, w := range wh.ByURL {
			out = append(out, preflight.Warning{Message: fmt.Sprintf(
				"%s cluster: %s is given by URL and cannot be bypassed; it must accept the moved objects while their controllers are down", c.role, w)})
		}
	}
	access, err := r.accessWarnings(ctx, s, target)
	if err != nil {
		return nil, err
	}
	out = append(out, access...)
	if a := s.mo.Spec.Target.Archive; a != nil && a.Unencrypted {
		out = append(out, preflight.Warning{Reason: movev1alpha1.ReasonArchiveUnencrypted, Message: "spec.target.archive.unencrypted: the archive is written in the clear, and it holds every credential of the backed-up clusters (CA and etcd keys, kubeconfigs, cloud credentials): whoever can read the store can take over the fleet"})
	}
	return out, nil
}

// accessWarnings says what in the way the operator reaches the clusters a
// user should know, without stopping the move: a target whose certificate is
// not verified, and identities that others may share (every request made
// with the operator's identity skips the stopped providers' webhooks).
func (r *MoveOperationReconciler) accessWarnings(ctx context.Context, s *scope, target *remote.Target) ([]preflight.Warning, error) {
	var out []preflight.Warning
	if target != nil && target.Insecure {
		out = append(out, preflight.Warning{Reason: movev1alpha1.ReasonInsecureTarget, Message: fmt.Sprintf(
			"the target kubeconfig sets insecure-skip-tls-verify: the operator does not verify that %s is the target, so whoever answers there receives the moved Secrets; put the target's CA in certificate-authority-data", target.Server)})
	}
	for _, c := range r.clusters(target) {
		who, err := r.whoAmI(ctx, s, c.client)
		if err != nil {
			return nil, fmt.Errorf("%s cluster: %w", c.role, err)
		}
		if who.Shared() {
			out = append(out, preflight.Warning{Reason: movev1alpha1.ReasonSharedIdentity, Message: fmt.Sprintf(
				"%s cluster: the operator acts as %q, which is not a ServiceAccount; while the move runs every request made as %q skips the stopped providers' webhooks, so anyone else using it can write objects they would refuse; give the operator a dedicated ServiceAccount there",
				c.role, who.Username, who.Username)})
		}
	}
	return out, nil
}
