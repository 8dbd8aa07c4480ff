package planner_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planner"
)

func TestTheSelectionIsWhatTheSpecSays(t *testing.T) {
	t.Run("an empty spec selects every namespace and every Cluster", func(t *testing.T) {
		sel, err := planner.SelectionOf(movev1alpha1.MoveOperationSpec{})
		if err != nil {
			t.Fatal(err)
		}
		if !sel.EveryNamespace() || sel.Clusters != nil {
			t.Errorf("got %+v, want every namespace and no Cluster selector", sel)
		}
	})
	t.Run("namespaces and a Cluster selector are taken as written", func(t *testing.T) {
		sel, err := planner.SelectionOf(movev1alpha1.MoveOperationSpec{
			Namespaces:      []string{"team-a", "team-b"},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"team-a", "team-b"}, sel.Namespaces); diff != "" {
			t.Errorf("namespaces (-want +got):\n%s", diff)
		}
		if !sel.Clusters.Matches(labels.Set{"env": "prod"}) || sel.Clusters.Matches(labels.Set{"env": "dev"}) {
			t.Errorf("the Cluster selector %s does not select env=prod alone", sel.Clusters)
		}
		if got := sel.Rules().ClusterSelector; got == nil || got.String() != sel.Clusters.String() {
			t.Errorf("the rules got Cluster selector %v, want %s", got, sel.Clusters)
		}
	})
	t.Run("an invalid Cluster selector names the field, and keeps the namespaces for their own check", func(t *testing.T) {
		sel, err := planner.SelectionOf(movev1alpha1.MoveOperationSpec{
			Namespaces:      []string{"team-a"},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"not a key!": "x"}},
		})
		var selErr *planner.SelectionError
		if !errors.As(err, &selErr) || !strings.Contains(err.Error(), "spec.clusterSelector is not a valid label selector") {
			t.Fatalf("got %v, want a SelectionError naming spec.clusterSelector", err)
		}
		if diff := cmp.Diff([]string{"team-a"}, sel.Namespaces); diff != "" {
			t.Errorf("namespaces (-want +got):\n%s", diff)
		}
	})
}

func TestAPlanRequiresTheNamespacesItsSpecNamesEvenWhenEmpty(t *testing.T) {
	ts := graph.NewTypes()
	g := graph.New(ts, []string{"full", "empty"})
	sel := planner.Selection{Namespaces: []string{"full", "empty"}}
	p := planner.Of(g, sel)
	if p.Len() != 0 {
		t.Fatalf("an empty graph planned %d objects", p.Len())
	}
	if diff := cmp.Diff([]string{"empty", "full"}, p.Namespaces()); diff != "" {
		t.Errorf("the namespaces the target must have (-want +got):\n%s", diff)
	}
}
