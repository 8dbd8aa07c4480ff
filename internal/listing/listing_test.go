package listing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// configMaps returns a client holding ten ConfigMaps whose continue tokens
// expire: the first `expiries` requests that carry one fail with 410.
func configMaps(t *testing.T, expiries int32) (client.Client, *atomic.Int32) {
	t.Helper()
	var objs []client.Object
	for i := range 10 {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%02d", i), UID: types.UID(fmt.Sprintf("uid-%02d", i))}})
	}
	var requests, expired atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			requests.Add(1)
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.Continue != "" && expired.Add(1) <= expiries {
				return apierrors.NewResourceExpired("continue token expired")
			}
			// The fake client does not page: page its full list here, with
			// the offset of the next page as the continue token.
			if err := c.List(ctx, list, client.InNamespace(o.Namespace)); err != nil {
				return err
			}
			cms := list.(*corev1.ConfigMapList)
			start := 0
			if o.Continue != "" {
				start, _ = strconv.Atoi(o.Continue)
			}
			end := min(start+int(o.Limit), len(cms.Items))
			cms.Items = cms.Items[start:end]
			cms.Continue = ""
			if end < len(objs) {
				cms.Continue = strconv.Itoa(end)
			}
			return nil
		},
	})
	return c, &requests
}

func request(c client.Client) Request {
	return Request{
		List:     c.List,
		NewList:  func() client.ObjectList { return &corev1.ConfigMapList{} },
		PageSize: 4,
		Options:  []client.ListOption{client.InNamespace("ns")},
	}
}

func TestEach(t *testing.T) {
	ctx := context.Background()

	t.Run("every object is handled once, page by page", func(t *testing.T) {
		c, requests := configMaps(t, 0)
		seen := map[string]int{}
		if err := Each(ctx, request(c), func(o client.Object) error { seen[o.GetName()]++; return nil }); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 10 {
			t.Errorf("handled %d objects, want 10", len(seen))
		}
		if requests.Load() != 3 {
			t.Errorf("%d requests, want 3 pages of at most 4", requests.Load())
		}
	})

	t.Run("an expired continue token starts the listing over, and no object is handled twice", func(t *testing.T) {
		c, _ := configMaps(t, 2)
		seen := map[string]int{}
		if err := Each(ctx, request(c), func(o client.Object) error { seen[o.GetName()]++; return nil }); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 10 {
			t.Errorf("handled %d objects, want 10", len(seen))
		}
		for name, n := range seen {
			if n != 1 {
				t.Errorf("%s handled %d times, want once", name, n)
			}
		}
	})

	t.Run("a token that keeps expiring fails the listing after MaxRestarts", func(t *testing.T) {
		c, requests := configMaps(t, 1000)
		err := Each(ctx, request(c), func(client.Object) error { return nil })
		if !apierrors.IsResourceExpired(err) {
			t.Fatalf("got %v, want the expiry", err)
		}
		// Each try reads a first page and fails on the second.
		if want := int32(2 * (MaxRestarts + 1)); requests.Load() != want {
			t.Errorf("%d requests, want %d", requests.Load(), want)
		}
	})

	t.Run("an error of the callback stops the listing, and is returned as it is", func(t *testing.T) {
		c, _ := configMaps(t, 0)
		stop := apierrors.NewResourceExpired("the callback's own")
		calls := 0
		err := Each(ctx, request(c), func(client.Object) error { calls++; return stop })
		if !errors.Is(err, stop) || calls != 1 {
			t.Errorf("got %v after %d calls, want the callback's error after 1", err, calls)
		}
	})
}
