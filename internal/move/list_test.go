package move

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
)

// TestAnExpiredListLeavesTheRestOfTheCopyToGets shows that when the source
// expires the continue token of a copy's list, the objects of the pages
// already read come with their source copies and the others are left to be
// read one by one: every object once.
func TestAnExpiredListLeavesTheRestOfTheCopyToGets(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	for i := range 10 {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: fmt.Sprintf("cm-%02d", i), UID: uidOf("ns", i),
			Labels: map[string]string{graph.MoveLabel: ""},
		}})
	}
	// The fake client does not page: page its full list here, with the
	// offset of the next page as the continue token, which has always
	// expired.
	source := interceptor.NewClient(fake.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.Continue != "" {
				return apierrors.NewResourceExpired("continue token expired")
			}
			if err := c.List(ctx, list, client.InNamespace(o.Namespace)); err != nil {
				return err
			}
			u := list.(*unstructured.UnstructuredList)
			u.Items = u.Items[:4]
			u.SetContinue(strconv.Itoa(4))
			return nil
		},
	})
	plan := configMapPlan(t, ctx, fake.NewClientBuilder().WithObjects(objs...).Build())
	if len(plan.Groups) != 1 || len(plan.Groups[0]) != 10 {
		t.Fatalf("plan groups %v, want one group of 10", plan.Groups)
	}
	c := NewCopier(source, nil, plan, "op", Options{})
	seen := map[string]int{}
	preloaded := 0
	for item := range c.sources(ctx, plan.Groups[0]) {
		seen[item.object.Name]++
		if item.source != nil {
			preloaded++
		}
	}
	if len(seen) != 10 || preloaded != 4 {
		t.Errorf("%d objects, %d with their source copies; want 10 and the first page's 4", len(seen), preloaded)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s yielded %d times, want once", name, n)
		}
	}
}
