package preflight

import (
	"testing"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// A refused creator is shown nothing of the source: not its plan, not even
// which kinds it serves at which versions.
func TestARefusedCreatorIsShownNothingOfTheSource(t *testing.T) {
	e := &Env{KindVersions: []KindVersion{{}}}
	e.refuseCreator(movev1alpha1.ReasonCreatorNotAllowed, "refused")
	if e.Plan != nil || e.GitOps != nil || e.KindVersions != nil {
		t.Errorf("after the refusal the checks still hold what the source holds: plan %v, gitops %v, versions %v", e.Plan, e.GitOps, e.KindVersions)
	}
}
