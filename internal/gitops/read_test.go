package gitops

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/graph/graphtest"
)

// Detect reads the labels of every object of the plan. At 1,000 workload
// clusters, keeping the objects it read (each pointing into its page of
// metadata, managed fields included) until it counted them was most of the
// operator's peak heap. The pages it has read must be freed while it reads
// on: at any time it holds about two pages per concurrent list.
func TestDetectFreesThePagesItHasReadWhileItReadsOn(t *testing.T) {
	g := graph.New(graphtest.Types(), []string{"fleet"})
	if err := graphtest.Fleet(graphtest.Options{Clusters: 40}, g.Add); err != nil {
		t.Fatalf("building the fleet: %v", err)
	}
	plan := g.Plan(graph.Selection{})

	r := newPagingReader(plan)
	managers, managed, err := Detect(context.Background(), r, plan)
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}

	// What Detect found: every object carries the Kustomization's labels.
	want := []Managed{{Ref: Ref{GroupKind: KustomizationKind, Namespace: "flux-system", Name: "clusters"}, Objects: plan.Len()}}
	if len(managers) != 1 || managers[0] != want[0] || managed != plan.Len() {
		t.Errorf("Detect = %v, %d managed; want %v, %d", managers, managed, want, plan.Len())
	}

	served, mostLive := r.result()
	t.Logf("%d pages served, at most %d in memory at once", served, mostLive)
	// Each concurrent list holds the page it hands out and the one it reads
	// ahead; one more per list for the collector's lag.
	bound := 3 * graph.DefaultListConcurrency
	if served < 5*bound {
		t.Fatalf("only %d pages served: too few to tell a reader that keeps them from one that does not (want at least %d)", served, 5*bound)
	}
	if mostLive > bound {
		t.Errorf("up to %d of the %d pages served were still in memory while Detect read on; want at most %d (%d concurrent lists)",
			mostLive, served, bound, graph.DefaultListConcurrency)
	}
}

// managedFields stands for an object's managed fields: 4 KiB.
var managedFields = "{" + strings.Repeat(" ", 4<<10-2) + "}"

// pageItems is how many objects each page holds, whatever the limit asked:
// an API server may return fewer, and small pages make many.
const pageItems = 10

// pagingReader serves lists of the plan's objects as PartialObjectMetadata
// pages that carry GitOps labels and a managed fields entry of a few
// kilobytes, as a real API server's do. It notes each page it hands out,
// and before each list it collects garbage and counts the pages still in
// memory.
type pagingReader struct {
	client.Reader // nil: Detect only lists
	objects       map[scope][]*graph.Object

	mu             sync.Mutex
	served, freed  int
	mostLive       int
	collectedPages chan struct{}
}

type scope struct {
	gvk       schema.GroupVersionKind
	namespace string
}

func newPagingReader(plan *graph.Plan) *pagingReader {
	r := &pagingReader{objects: map[scope][]*graph.Object{}, collectedPages: make(chan struct{}, 1<<16)}
	for _, o := range plan.Objects() {
		s := scope{gvk: o.GVK, namespace: o.Namespace}
		r.objects[s] = append(r.objects[s], o)
	}
	return r
}

func (r *pagingReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.measure()
	o := (&client.ListOptions{}).ApplyOptions(opts)
	gvk := list.GetObjectKind().GroupVersionKind()
	gvk.Kind = gvk.Kind[:len(gvk.Kind)-len("List")]
	all := r.objects[scope{gvk: gvk, namespace: o.Namespace}]
	start := 0
	if o.Continue != "" {
		var err error
		if start, err = strconv.Atoi(o.Continue); err != nil {
			return fmt.Errorf("continue token %q: %w", o.Continue, err)
		}
	}
	end := min(start+pageItems, len(all))
	page := list.(*metav1.PartialObjectMetadataList)
	page.Items = make([]metav1.PartialObjectMetadata, end-start)
	for i, obj := range all[start:end] {
		page.Items[i] = metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID,
			Labels: map[string]string{
				FluxKustomizationNameLabel: "clusters", FluxKustomizationNamespaceLabel: "flux-system",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "fleet", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsV1: metav1.NewFieldsV1(managedFields), // a copy of its own per object
			}},
		}}
	}
	page.Continue = ""
	if end < len(all) {
		page.Continue = strconv.Itoa(end)
	}
	if len(page.Items) > 0 {
		runtime.AddCleanup(&page.Items[0], func(ch chan struct{}) { ch <- struct{}{} }, r.collectedPages)
		r.mu.Lock()
		r.served++
		r.mu.Unlock()
	}
	return nil
}

// measure collects garbage, waits briefly for the pages' cleanups to run,
// and notes how many pages served are still in memory.
func (r *pagingReader) measure() {
	runtime.GC()
	deadline := time.After(5 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		select {
		case <-r.collectedPages:
			r.freed++
			continue
		case <-deadline:
		}
		break
	}
	r.mostLive = max(r.mostLive, r.served-r.freed)
}

func (r *pagingReader) result() (served, mostLive int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served, r.mostLive
}
