package planner_test

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planner"
)

// limits records the limit of every LIST it serves.
type limits struct {
	client.Reader
	mu   sync.Mutex
	seen []int64
}

func (l *limits) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	l.mu.Lock()
	l.seen = append(l.seen, lo.Limit)
	l.mu.Unlock()
	return l.Reader.List(ctx, list, opts...)
}

// A plan reads its objects in pages of PageSize at most: the pages, not
// the graph, were most of what a backup of a thousand clusters held while
// it planned.
func TestAPlanReadsItsObjectsInSmallPages(t *testing.T) {
	secrets := graph.Type{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: "secrets", Namespaced: true}
	r := &limits{Reader: fake.NewClientBuilder().Build()}
	src := planner.Source{Reader: r}
	if _, err := src.Read(context.Background(), planner.Selection{Namespaces: []string{"fleet"}}, graph.NewTypes(secrets)); err != nil {
		t.Fatal(err)
	}
	if len(r.seen) == 0 {
		t.Fatal("the plan listed nothing")
	}
	for _, limit := range r.seen {
		if limit <= 0 || limit > planner.PageSize {
			t.Errorf("a LIST asked for pages of %d, want at most %d", limit, planner.PageSize)
		}
	}
}
