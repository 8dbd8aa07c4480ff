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
	"github.com/move-operator/move-operator/internal/graph"
)

// What the operator does to GitOps managers of moved objects, in the source
// only (the target's GitOps tools are the user's to point at what moved):
// read them, suspend them, and give them back what they had on a rollback.
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;patch;update
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;patch;update
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;patch;update

// maxGitOpsNamed is how many managers a message names.
const maxGitOpsNamed = 10

// maxGitOpsItems is how many managers status.plan.gitOps.items holds (its
// MaxItems validation).
const maxGitOpsItems = 50

// validateGitOps finds the GitOps managers of the plan's objects, reports
// them in status.plan.gitOps, and applies spec.gitOps: Refuse fails the
// move (stop is true), Suspend and Ignore add a plan warning (Ignore also
// an event). It writes nothing to the clusters.
func (r *MoveOperationReconciler) validateGitOps(ctx context.Context, s *scope, plan *graph.Plan) (stop bool, err error) {
	mo := s.mo
	managed, objects, err := gitops.Detect(ctx, r.Source, plan)
	if err != nil {
		return false, fmt.Errorf("finding the GitOps managers of the objects to move: %w", err)
	}
	s.gitOps = nil
	if len(managed) == 0 {
		return false, nil
	}
	managers, err := gitops.Resolve(ctx, r.Source, managed)
	if err != nil {
		return false, fmt.Errorf("reading the GitOps managers of the objects to move: %w", err)
	}
	s.gitOps = gitOpsReport(managers, objects)
	if mo.Status.Plan != nil {
		mo.Status.Plan.GitOps = s.gitOps
	}
	named := gitops.Describe(managers, maxGitOpsNamed)
	var missing []gitops.Manager
	for _, m := range managers {
		if m.State == movev1alpha1.GitOpsNotFound {
			missing = append(missing, m)
		}
	}
	switch mo.Spec.GitOps {
	case movev1alpha1.GitOpsSuspend:
		verb := "are suspended"
		if mo.Spec.DryRun {
			verb = "would be suspended"
		}
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"GitOps manages %d objects to move: %s; the reconciling ones %s in the source before the move writes anything, and stay suspended after it: point their sources at the target cluster (or remove the moved objects from them), then resume them; a rollback gives them back what they had",
			objects, named, verb))
		if len(missing) > 0 {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf(
				"%s: named by moved objects, not found in the source cluster; if they run in another cluster (a GitOps tool managing this one remotely), suspend them there yourself before the move",
				gitops.Describe(missing, maxGitOpsNamed)))
		}
	case movev1alpha1.GitOpsIgnore:
		msg := fmt.Sprintf("GitOps manages %d objects to move: %s; spec.gitOps is Ignore, so they keep running: stop them yourself, or they re-create the moved objects in the source after the move", objects, named)
		plan.Warnings = append(plan.Warnings, msg)
		r.event(mo, "Warning", movev1alpha1.ReasonGitOpsIgnored, string(movev1alpha1.PhaseValidating), msg)
	default: // Refuse, also for objects created before the field existed.
		s.fail(movev1alpha1.ReasonGitOpsManaged, fmt.Sprintf(
			"GitOps manages %d objects to move: %s; left running, they would re-create the moved objects in the source after the move. Create a new MoveOperation with spec.gitOps: Suspend to have the move suspend them (then point them at the target and resume them), or Ignore if you stop them yourself",
			objects, named))
		return true, nil
	}
	return false, nil
}

// gitOpsReport is the status report of the managers found.
func gitOpsReport(managers []gitops.Manager, objects int) *movev1alpha1.GitOpsReport {
	report := &movev1alpha1.GitOpsReport{Managers: clamp32(len(managers)), ManagedObjects: clamp32(objects)}
	for i, m := range managers {
		if i == maxGitOpsItems {
			break
		}
		item := movev1alpha1.GitOpsManager{
			Kind: gitops.KindString(m.GroupKind), Namespace: m.Namespace, Name: m.Name,
			Objects: clamp32(m.Objects), State: m.State,
		}
		for j, child := range m.Manages {
			if j == 10 { // the field's MaxItems
				break
			}
			item.Manages = append(item.Manages, child.String())
		}
		report.Items = append(report.Items, item)
	}
	return report
}

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
		if i == maxGitOpsNamed {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-maxGitOpsNamed))
			break
		}
		names = append(names, ref.String())
	}
	return strings.Join(names, ", ")
}

func clamp32(n int) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}
