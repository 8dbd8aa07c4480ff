package preflight

import (
	"context"
	"fmt"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/gitops"
)

// MaxGitOpsNamed is how many GitOps managers a message names.
const MaxGitOpsNamed = 10

// maxGitOpsItems is how many managers status.plan.gitOps.items holds (its
// MaxItems validation).
const maxGitOpsItems = 50

// checkGitOps finds the GitOps managers of the plan's objects, reports them
// for status.plan.gitOps, and applies spec.gitOps: Refuse (the default) is
// a finding, Suspend and Ignore a warning (Ignore also an event).
func checkGitOps(ctx context.Context, e *Env) error {
	if e.Plan == nil {
		return nil
	}
	managed, objects, err := gitops.Detect(ctx, e.Source, e.Plan)
	if err != nil {
		return fmt.Errorf("finding the GitOps managers of the objects to move: %w", err)
	}
	if len(managed) == 0 {
		return nil
	}
	managers, err := gitops.Resolve(ctx, e.Source, managed)
	if err != nil {
		return fmt.Errorf("reading the GitOps managers of the objects to move: %w", err)
	}
	e.GitOps = gitOpsReport(managers, objects)
	named := gitops.Describe(managers, MaxGitOpsNamed)
	switch e.Spec.GitOps {
	case movev1alpha1.GitOpsSuspend:
		verb := "are suspended"
		if e.Spec.DryRun {
			verb = "would be suspended"
		}
		e.warn("", fmt.Sprintf(
			"GitOps manages %d objects to move: %s; the reconciling ones %s in the source before the move writes anything, and stay suspended after it: point their sources at the target cluster (or remove the moved objects from them), then resume them; a rollback gives them back what they had",
			objects, named, verb))
		var missing []gitops.Manager
		for _, m := range managers {
			if m.State == movev1alpha1.GitOpsNotFound {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			e.warn("", fmt.Sprintf(
				"%s: named by moved objects, not found in the source cluster; if they run in another cluster (a GitOps tool managing this one remotely), suspend them there yourself before the move",
				gitops.Describe(missing, MaxGitOpsNamed)))
		}
	case movev1alpha1.GitOpsIgnore:
		e.warn(movev1alpha1.ReasonGitOpsIgnored, fmt.Sprintf(
			"GitOps manages %d objects to move: %s; spec.gitOps is Ignore, so they keep running: stop them yourself, or they re-create the moved objects in the source after the move", objects, named))
	default: // Refuse, also for objects created before the field existed.
		e.find(movev1alpha1.ReasonGitOpsManaged, fmt.Sprintf(
			"GitOps manages %d objects to move: %s; left running, they would re-create the moved objects in the source after the move. Create a new MoveOperation with spec.gitOps: Suspend to have the move suspend them (then point them at the target and resume them), or Ignore if you stop them yourself",
			objects, named))
	}
	return nil
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

func clamp32(n int) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}
