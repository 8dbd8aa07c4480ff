package quiesce

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestRestartInOrderBringsTheManagersBackOnlyOnceTheProvidersAreAvailable(t *testing.T) {
	ctx := context.Background()
	provider := rolledOut(0)
	manager := rolledOut(0)
	manager.Namespace, manager.Name = "capi-operator-system", "capi-operator-controller-manager"
	c := fake.NewClientBuilder().WithObjects(provider, manager).WithStatusSubresource(&appsv1.Deployment{}).Build()
	controllers := []Controller{
		{Key: client.ObjectKeyFromObject(manager), Recorded: ptr.To[int32](1), Manager: true},
		{Key: client.ObjectKeyFromObject(provider), Recorded: ptr.To[int32](2)},
		{Key: types.NamespacedName{Namespace: "gone", Name: "deleted-during-the-move"}, Recorded: ptr.To[int32](1)},
	}

	restart, err := RestartInOrder(ctx, c, controllers, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, waiting := restart.Unavailable[client.ObjectKeyFromObject(provider)]; len(restart.Unavailable) != 1 || !waiting {
		t.Errorf("waiting for %v, want the provider alone", restart.Unavailable)
	}
	if got := replicasOf(t, c, manager); got != 0 {
		t.Errorf("the manager is at %d while its provider is not Available, want 0: back first, it would find the provider stopped", got)
	}
	if got := replicasOf(t, c, provider); got != 2 {
		t.Errorf("the provider is at %d, want its recorded 2", got)
	}
	if len(restart.Gone) != 1 || restart.Gone[0].Name != "deleted-during-the-move" {
		t.Errorf("gone %v, want the Deployment deleted during the move", restart.Gone)
	}

	// The provider's rollout finishes: the manager comes back.
	available := rolledOut(2)
	provider.Status = available.Status
	if err := c.Status().Update(ctx, withGenerationOf(t, c, provider)); err != nil {
		t.Fatal(err)
	}
	if restart, err = RestartInOrder(ctx, c, controllers, 1); err != nil {
		t.Fatal(err)
	}
	if got := replicasOf(t, c, manager); got != 1 {
		t.Errorf("the manager is at %d once its provider is Available, want its recorded 1 (waiting for %v)", got, restart.Unavailable)
	}
}

func TestManagersInNamesEachManagerOnceAndNeverTheOperator(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	self := types.NamespacedName{Namespace: "move-operator-system", Name: "move-operator-controller-manager"}
	turtles := types.NamespacedName{Namespace: "rancher-turtles-system", Name: "rancher-turtles-controller-manager"}
	got, err := ManagersIn(ctx, c, []types.NamespacedName{turtles, self, turtles}, []types.NamespacedName{self})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != turtles {
		t.Errorf("managers %v, want %v alone", got, turtles)
	}
}

func replicasOf(t *testing.T, c client.Client, d *appsv1.Deployment) int32 {
	t.Helper()
	got := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(got.Spec.Replicas, 1)
}

// withGenerationOf returns d with the generation and resource version the
// cluster holds, its status as d has it, rolled out at that generation.
func withGenerationOf(t *testing.T, c client.Client, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	got := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	got.Status = d.Status
	got.Status.ObservedGeneration = got.Generation
	return got
}
