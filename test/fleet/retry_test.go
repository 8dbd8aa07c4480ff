package fleet

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestTransientFailuresOfTheFixtureAreToldFromRefusals(t *testing.T) {
	cluster := schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"a webhook that timed out reading the ClusterClass", apierrors.NewInvalid(cluster, "c", field.ErrorList{field.InternalError(field.NewPath("spec", "topology", "class"),
			errors.New("unexpected error when reading response body. Please retry. Original error: context deadline exceeded"))}), true},
		{"a webhook the API server could not call", apierrors.NewInternalError(errors.New(`failed calling webhook "validation.cluster.cluster.x-k8s.io": connection refused`)), true},
		{"the API server's own timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "clusters"}, "create", 1), true},
		{"a refusal", apierrors.NewInvalid(cluster, "c", field.ErrorList{field.Required(field.NewPath("spec", "topology", "class"), "")}), false},
		{"an object already there", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "clusters"}, "c"), false},
	} {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("%s: transient = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A create whose answer was lost made the object: the retry finds it, and
// reads it back, so that owner references name the UID it was given.
func TestACreateWhoseAnswerWasLostReadsTheObjectBack(t *testing.T) {
	ctx := context.Background()
	calls := 0
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			calls++
			if calls == 1 {
				made := obj.DeepCopyObject().(client.Object)
				made.SetUID("uid-made")
				if err := c.Create(ctx, made, opts...); err != nil {
					return err
				}
				return apierrors.NewTimeoutError("the answer was lost", 1)
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	w := &writer{c: c, counts: map[string]int{}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	if err := w.create(ctx, cm, nil); err != nil {
		t.Fatalf("create: %v", err)
	}
	if calls != 2 || cm.GetUID() != "uid-made" {
		t.Errorf("after %d creates the object has UID %q, want 2 creates and the UID of the one made", calls, cm.GetUID())
	}
}
