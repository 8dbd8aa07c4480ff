package move

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/move-operator/move-operator/internal/graph"
)

// configMapsApart is a source of n ConfigMaps, each in a namespace of its
// own (so that each is read with a GET), and their plan.
func configMapsApart(t *testing.T, n int) (client.Client, *graph.Plan) {
	t.Helper()
	var objs []client.Object
	for i := range n {
		ns := fmt.Sprintf("ns-%02d", i)
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "cm", UID: uidOf(ns, 0), Labels: map[string]string{graph.MoveLabel: ""},
		}})
	}
	source := fake.NewClientBuilder().WithObjects(objs...).Build()
	return source, configMapPlan(t, context.Background(), source)
}

// What the caller does with an object fails: ReadGroup stops there and
// says so.
func TestReadGroupStopsAtTheCallersError(t *testing.T) {
	source, p := configMapsApart(t, 8)
	stop := errors.New("the archive's volume is full")
	calls := 0
	err := ReadGroup(context.Background(), source, p, 0, func(*graph.Object, *unstructured.Unstructured) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("got %v after %d calls; want the caller's error after 2", err, calls)
	}
}

// An object gone from the source is a VanishedError, as for a copy.
func TestReadGroupReportsAVanishedObject(t *testing.T) {
	source, p := configMapsApart(t, 4)
	gone := p.Groups[0][2]
	if err := source.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gone.Namespace, Name: gone.Name}}); err != nil {
		t.Fatal(err)
	}
	err := ReadGroup(context.Background(), source, p, 0, func(*graph.Object, *unstructured.Unstructured) error { return nil })
	var vanished *VanishedError
	if !errors.As(err, &vanished) || vanished.Object.UID != gone.UID {
		t.Errorf("got %v; want the VanishedError of %s", err, gone)
	}
}
