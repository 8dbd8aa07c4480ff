package move

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
)

// TestCopyReadsObjectsAtLeastAsNewAsThePlan shows that the objects a copy
// reads one by one are asked for at the resourceVersion the plan read, so
// that the API server answers from its watch cache.
func TestCopyReadsObjectsAtLeastAsNewAsThePlan(t *testing.T) {
	ctx := context.Background()
	var objects []client.Object
	for _, name := range []string{"a", "b", "c"} {
		objects = append(objects, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			UID: types.UID(name + "-uid"), Labels: map[string]string{graph.MoveLabel: ""}}})
	}
	var (
		mu  sync.Mutex
		got = map[string]string{}
	)
	source := interceptor.NewClient(fake.NewClientBuilder().WithObjects(objects...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			got[key.Name] = (&client.GetOptions{}).ApplyOptions(opts).AsGetOptions().ResourceVersion
			mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		},
	})
	target := fake.NewClientBuilder().Build()

	plan := configMapPlan(t, ctx, source)
	if _, err := NewCopier(source, target, plan, "op", Options{}).CopyGroup(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, o := range plan.Objects() {
		rv, read := got[o.Name]
		if !read || rv == "" || rv != o.ResourceVersion {
			t.Errorf("%s was read (%v) at resourceVersion %q, want the plan's %q", o, read, rv, o.ResourceVersion)
		}
	}
}
