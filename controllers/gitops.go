package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/gitops"
	"github.com/move-operator/move-operator/internal/preflight"
)

// What the operator does to GitOps managers of moved objects, in the source
// only (the target's GitOps tools are the user's to point at what moved):
// read them, suspend them, and give them back what they had on a rollback.
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;patch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;patch

// suspendGitOps suspends, when spec.gitOps is Suspend, the GitOps managers
// found in Validating, before the move writes anything else to the source.
// It reads them from the status when the status lists every one, and from
// the plan's objects again when there were too many to list.
func (r *MoveOperationReconciler) suspendGitOps(ctx context.Context, s *scope) error {
	mo := s.mo
	if mo.Spec.GitOps != movev1alpha1.GitOpsSuspend || mo.Status.Plan == nil || mo.Status.Plan.GitOps == nil {
		return nil
	}
	report := mo.Status.Plan.GitOps
	var refs []gitops.Ref
	if int(report.Managers) <= len(report.Items) {
		for _, m := range report.Items {
			if m.State != movev1alpha1.GitOpsNotFound {
				refs = append(refs, refOfStatus(m))
			}
		}
	} else {
		plan, err := r.buildPlan(ctx, mo)
		if err != nil {
			return err
		}
		managed, _, err := gitops.Detect(ctx, r.Source, plan)
		if err != nil {
			return fmt.Errorf("finding the GitOps managers of the objects to move: %w", err)
		}
		managers, err := gitops.Resolve(ctx, r.Source, managed)
		if err != nil {
			return fmt.Errorf("reading the GitOps managers of the objects to move: %w", err)
		}
		for _, m := range managers {
			if m.State != movev1alpha1.GitOpsNotFound {
				refs = append(refs, m.Ref)
			}
		}
	}
	held, err := gitops.Suspend(ctx, r.Source, refs, string(mo.UID))
	if err != nil {
		return fmt.Errorf("source cluster: %w", err)
	}
	for i, m := range report.Items {
		if slices.Contains(held, refOfStatus(m)) {
			report.Items[i].State = movev1alpha1.GitOpsSuspendedForMove
		}
	}
	if len(held) > 0 {
		names := refNames(held)
		log.FromContext(ctx).Info("suspended the GitOps managers of the moved objects", "managers", names)
		r.event(mo, "Normal", movev1alpha1.ReasonGitOpsSuspended, string(phaseOf(mo)), fmt.Sprintf(
			"suspended in the source for the move: %s; they stay suspended after it: point them at the target cluster, then resume them", names))
	}
	return nil
}

// resumeGitOps gives the GitOps managers this move suspended in the source
// back what they had, on a rollback, once the source holds again everything
// they would apply. It finds them by their records, so a restarted
// operator resumes the same ones.
func (r *MoveOperationReconciler) resumeGitOps(ctx context.Context, s *scope) error {
	if s.mo.Spec.GitOps != movev1alpha1.GitOpsSuspend {
		return nil
	}
	restored, err := gitops.Restore(ctx, r.Source, string(s.mo.UID))
	if err != nil {
		return fmt.Errorf("source cluster: %w", err)
	}
	if report := s.mo.Status.Plan; report != nil && report.GitOps != nil {
		for i, m := range report.GitOps.Items {
			if m.State == movev1alpha1.GitOpsSuspendedForMove {
				report.GitOps.Items[i].State = movev1alpha1.GitOpsReconciling
			}
		}
	}
	if len(restored) > 0 {
		names := refNames(restored)
		log.FromContext(ctx).Info("gave the GitOps managers back their sync settings", "managers", names)
		r.event(s.mo, "Normal", movev1alpha1.ReasonGitOpsResumed, string(phaseOf(s.mo)), "sync settings as before the move: "+names)
	}
	return nil
}

// gitOpsDoneNote is what the Ready condition of a completed move adds about
// the GitOps managers it suspended: what the user does next.
func gitOpsDoneNote(mo *movev1alpha1.MoveOperation) string {
	if mo.Status.Plan == nil || mo.Status.Plan.GitOps == nil {
		return ""
	}
	var held []gitops.Ref
	for _, m := range mo.Status.Plan.GitOps.Items {
		if m.State == movev1alpha1.GitOpsSuspendedForMove {
			held = append(held, refOfStatus(m))
		}
	}
	if len(held) == 0 {
		return ""
	}
	return fmt.Sprintf("; the GitOps managers %s stay suspended in the source: point their sources at the target cluster (or remove the moved objects from them), then resume them (the %s annotation on each holds what it had)",
		refNames(held), movev1alpha1.OriginalGitOpsSyncAnnotation)
}

func refOfStatus(m movev1alpha1.GitOpsManager) gitops.Ref {
	kind, group, _ := strings.Cut(m.Kind, ".")
	return gitops.Ref{GroupKind: schema.GroupKind{Group: group, Kind: kind}, Namespace: m.Namespace, Name: m.Name}
}

func refNames(refs []gitops.Ref) string {
	names := make([]string, 0, len(refs))
	for i, ref := range refs {
		if i == preflight.MaxGitOpsNamed {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-preflight.MaxGitOpsNamed))
			break
		}
		names = append(names, ref.String())
	}
	return strings.Join(names, ", ")
}
