package controllers

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// decideTargetVersions gives the plan Copying records the versions the
// target stores each kind at, as Validating decided them and
// status.plan.versions lists them, once both clusters are found to store
// the plan's kinds at those versions still: a CRD upgraded or replaced in
// either cluster since (clusterctl upgrade run meanwhile) fails the move,
// with nothing copied, rather than write at versions nobody decided. A
// MoveOperation validated by an operator that decided no versions moved
// every kind at one version, and must still.
func (r *MoveOperationReconciler) decideTargetVersions(ctx context.Context, mo *movev1alpha1.MoveOperation, target *remote.Target, plan *graph.Plan) (outcome, error) {
	sourceTypes, err := r.sourceTypes.Discover(ctx, r.Source)
	if err != nil {
		return outcome{}, fmt.Errorf("discovering the kinds to move in the source: %w", err)
	}
	targetTypes, err := graph.DiscoverTypes(ctx, target.Client)
	if err != nil {
		return outcome{}, fmt.Errorf("target cluster: discovering the kinds to move: %w", err)
	}
	var decided []movev1alpha1.KindVersion
	if mo.Status.Plan != nil {
		decided = mo.Status.Plan.Versions
	}
	now := preflight.KindVersions(sourceTypes, targetTypes)
	if changed := versionsChanged(decided, now, plan); len(changed) > 0 {
		return failWith(movev1alpha1.ReasonCRDMismatch, fmt.Sprintf(
			"the versions the clusters store kinds at changed since the move validated (%s); the move is rolled back, nothing was copied: create a new MoveOperation",
			strings.Join(changed, "; "))), nil
	}
	plan.SetTargetVersions(preflight.TargetVersions(now))
	return done(), nil
}

// checkGoingBackAgain refuses, as Validating did, a move back into an
// older Cluster API whose objects hold in their spec or metadata what the
// older version cannot hold (preflight.CheckGoingBack), read again now
// that the controllers are stopped: between Validating and the stop, a
// user or a controller may have set such a field, which the conversion
// would otherwise lose without a word.
func (r *MoveOperationReconciler) checkGoingBackAgain(ctx context.Context, mo *movev1alpha1.MoveOperation, target *remote.Target, plan *graph.Plan) (outcome, error) {
	back, err := preflight.CheckGoingBack(ctx, r.Source, target.Client, plan, mo.Spec.CarriesStatus())
	if err != nil {
		return outcome{}, err
	}
	if msg := back.RefusalMessage(); msg != "" {
		return failWith(movev1alpha1.ReasonFieldsNotInOlderVersion, msg+" (read again once the controllers were stopped, after the move validated); the move is rolled back, nothing was copied"), nil
	}
	return done(), nil
}

// versionsChanged names the kinds of the plan whose versions, or whose
// way across, differ between what Validating decided and what the clusters
// say now. Without a decision (an older operator validated), every kind
// must be stored at one version in both, with no refusal.
func versionsChanged(decided []movev1alpha1.KindVersion, now []preflight.KindVersion, plan *graph.Plan) []string {
	byKind := map[string]movev1alpha1.KindVersion{}
	for _, kv := range decided {
		byKind[kv.Kind] = kv
	}
	moved := map[string]bool{}
	for _, k := range plan.Kinds() {
		moved[k.Kind] = true
	}
	var changed []string
	for _, kv := range preflight.StatusOf(now) {
		if !moved[kv.Kind] {
			continue
		}
		was, ok := byKind[kv.Kind]
		if !ok && len(decided) == 0 {
			was = movev1alpha1.KindVersion{Kind: kv.Kind, Source: kv.Source, Target: kv.Source, Conversion: movev1alpha1.ConversionNone}
		}
		if was != kv {
			changed = append(changed, fmt.Sprintf("%s was %s, is %s", kv.Kind, versionsOf(was), versionsOf(kv)))
		}
	}
	return changed
}

// versionsOf says, for a message, how one kind is stored in both clusters.
func versionsOf(kv movev1alpha1.KindVersion) string {
	switch {
	case kv.Kind == "":
		return "not decided"
	case kv.Refusal != "":
		return fmt.Sprintf("%s in the source and %q in the target (%s)", kv.Source, kv.Target, kv.Refusal)
	}
	return fmt.Sprintf("%s in the source and %s in the target (%s)", kv.Source, kv.Target, kv.Conversion)
}

// creator's rights, as Validating held the plan it showed: the admission
// policy that vouches for the creator annotations must still be there as
// shipped, and the creator must be allowed to read every object the plan
// takes and delete every object it deletes.
// targetVersionsOf returns, from status.plan.versions, the versions the
// target stores the kinds at that the move converts: what
// graph.Plan.SetTargetVersions takes.
func targetVersionsOf(versions []movev1alpha1.KindVersion) map[schema.GroupKind]string {
	out := map[schema.GroupKind]string{}
	for _, kv := range versions {
		if kv.Refusal != "" || kv.Target == "" || kv.Target == kv.Source {
			continue
		}
		kind, group, _ := strings.Cut(kv.Kind, ".")
		out[schema.GroupKind{Group: group, Kind: kind}] = kv.Target
	}
	return out
}
