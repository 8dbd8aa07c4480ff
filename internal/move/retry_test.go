package move

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

func TestRetryTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}

	t.Run("a transient error is tried five times and then returned", func(t *testing.T) {
		var calls atomic.Int32
		overloaded := apierrors.NewTooManyRequests("slow down", 0)
		err := retryTransient(context.Background(), func() error { calls.Add(1); return overloaded })
		if !apierrors.IsTooManyRequests(err) || calls.Load() != 5 {
			t.Errorf("got %v after %d calls, want the overload after 5", err, calls.Load())
		}
	})

	t.Run("an error that is not transient is returned at once", func(t *testing.T) {
		var calls atomic.Int32
		err := retryTransient(context.Background(), func() error { calls.Add(1); return apierrors.NewNotFound(gr, "x") })
		if !apierrors.IsNotFound(err) || calls.Load() != 1 {
			t.Errorf("got %v after %d calls, want NotFound after 1", err, calls.Load())
		}
	})

	t.Run("a transient error once the context is done is not retried, and the error says why", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var calls atomic.Int32
		err := retryTransient(ctx, func() error {
			calls.Add(1)
			cancel()
			return apierrors.NewServerTimeout(gr, "get", 1)
		})
		if !apierrors.IsServerTimeout(err) || !errors.Is(err, context.Canceled) || calls.Load() != 1 {
			t.Errorf("got %v after %d calls, want the timeout and the cancellation after 1", err, calls.Load())
		}
	})
}

func TestPauseReadsAgainAfterAConflict(t *testing.T) {
	ref := graph.ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "ns", Name: "cc"}
	newClient := func(conflicts int32) (client.Client, *atomic.Int32, *atomic.Int32) {
		var gets, patches atomic.Int32
		c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cc"}}).Build(), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				gets.Add(1)
				return c.Get(ctx, key, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if patches.Add(1) <= conflicts {
					return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, obj.GetName(), errors.New("changed"))
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		})
		return c, &gets, &patches
	}

	t.Run("two conflicts, then the pause is written", func(t *testing.T) {
		c, gets, patches := newClient(2)
		if err := pause(context.Background(), c, ref, "op"); err != nil {
			t.Fatal(err)
		}
		if gets.Load() != 3 || patches.Load() != 3 {
			t.Errorf("%d reads and %d patches, want 3 of each", gets.Load(), patches.Load())
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), ref.Key(), cm); err != nil {
			t.Fatal(err)
		}
		if _, ok := cm.Annotations[graph.PausedAnnotation]; !ok || cm.Annotations[movev1alpha1.PausedByAnnotation] != "op" {
			t.Errorf("annotations %v, want paused by op", cm.Annotations)
		}
	})

	t.Run("after six conflicts it gives up, naming the object", func(t *testing.T) {
		c, _, patches := newClient(100)
		err := pause(context.Background(), c, ref, "op")
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "pausing ConfigMap ns/cc") || patches.Load() != 6 {
			t.Errorf("got %v after %d patches, want a conflict pausing ConfigMap ns/cc after 6", err, patches.Load())
		}
	})
}
