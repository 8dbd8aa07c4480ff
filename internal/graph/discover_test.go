package graph

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pageRecorder is a reader that answers every LIST with nothing and
// records, per list kind, the limits asked for and whether whole objects
// were asked for.
type pageRecorder struct {
	client.Reader
	mu     sync.Mutex
	limits map[string][]int64
	whole  map[string]bool
}

func (r *pageRecorder) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	kind := list.GetObjectKind().GroupVersionKind().Kind
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits[kind] = append(r.limits[kind], o.Limit)
	_, isWhole := list.(*unstructured.UnstructuredList)
	_, isMeta := list.(*metav1.PartialObjectMetadataList)
	if !isWhole && !isMeta {
		return fmt.Errorf("unexpected list type %T", list)
	}
	r.whole[kind] = isWhole
	return nil
}

// The kinds the rules read whole are read in small pages: their decoded
// pages, not what the plan keeps, set the plan's peak heap for a large
// fleet. Every other kind is read as metadata, in pages of the size asked.
func TestDiscoverReadsWholeObjectsInSmallPagesAndTheRestAsMetadata(t *testing.T) {
	r := &pageRecorder{limits: map[string][]int64{}, whole: map[string]bool{}}
	if _, err := Discover(context.Background(), r, testTypes(), DiscoverOptions{Namespaces: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	wholeKinds := map[string]bool{"ClusterList": true, "ClusterClassList": true, "ClusterResourceSetBindingList": true}
	for kind, limits := range r.limits {
		want, wantWhole := int64(DefaultPageSize), false
		switch {
		case wholeKinds[kind]:
			want, wantWhole = FullPageSize, true
		case kind == "ProviderList":
			wantWhole = true // clusterctl's inventory: a few objects, read whole for their namespaces
		}
		if r.whole[kind] != wantWhole {
			t.Errorf("%s read whole: %v, want %v", kind, r.whole[kind], wantWhole)
		}
		for _, l := range limits {
			if l != want {
				t.Errorf("%s listed with limit %d, want %d", kind, l, want)
			}
		}
	}
	for kind := range wholeKinds {
		if len(r.limits[kind]) == 0 {
			t.Errorf("%s was not listed; listed: %s", kind, strings.Join(keys(r.limits), ", "))
		}
	}
	if FullPageSize >= DefaultPageSize {
		t.Errorf("FullPageSize %d is not smaller than DefaultPageSize %d", FullPageSize, DefaultPageSize)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
