package move

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
)

// slowGets is a source of n ConfigMaps, each in a namespace of its own (so
// that each is read with a GET), whose GETs take a while; it counts how
// many are in flight at most.
func slowGets(t *testing.T, n int) (client.Client, *graph.Plan, *atomic.Int32) {
	t.Helper()
	var objs []client.Object
	for i := range n {
		ns := fmt.Sprintf("ns-%02d", i)
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "cm", UID: uidOf(ns, 0), Labels: map[string]string{graph.MoveLabel: ""},
		}})
	}
	var inFlight, most atomic.Int32
	source := interceptor.NewClient(fake.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			now := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return source, configMapPlan(t, context.Background(), source), &most
}

// A backup reads ahead of what it writes: the GETs of objects read one by
// one overlap, at most DefaultConcurrency at once, and the objects still
// come in the group's order.
func TestReadGroupReadsAheadInTheGroupsOrder(t *testing.T) {
	source, p, most := slowGets(t, 3*DefaultConcurrency)
	var got []string
	err := ReadGroup(context.Background(), source, p, 0, func(o *graph.Object, src *unstructured.Unstructured) error {
		if src.GetUID() != o.UID {
			t.Errorf("%s came with the source copy of %s/%s", o, src.GetNamespace(), src.GetName())
		}
		got = append(got, o.Namespace)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, o := range p.Groups[0] {
		want = append(want, o.Namespace)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v\nwant the group's order %v", got, want)
	}
	if m := most.Load(); m < 2 || m > DefaultConcurrency {
		t.Errorf("at most %d GETs in flight; want them to overlap, up to %d", m, DefaultConcurrency)
	}
}

// What the caller does with an object fails: ReadGroup stops there and
// says so, and reads on no further than it had read ahead.
func TestReadGroupStopsAtTheCallersError(t *testing.T) {
	source, p, _ := slowGets(t, 3*readAhead)
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
	source, p, _ := slowGets(t, 4)
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
