//go:build cluster

package integration

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
)

// TestTheProvisioningCheckReadsFullObjectsInSmallPages runs clusterctl's
// provisioning preflight over a fleet and checks that every list of full
// objects it makes asks for at most graph.FullPageSize: Machines decoded
// take about 25 KB each, and pages of 500 made this check the largest part
// of the operator's heap in Validating at 1,000 workload clusters.
func TestTheProvisioningCheckReadsFullObjectsInSmallPages(t *testing.T) {
	ctx := testContext(t)
	f := createFleet(t, ctx, 2)
	source, _ := clients(t)
	p := plan(t, ctx, source, f.Namespaces, graph.Selection{})

	var (
		mu     sync.Mutex
		limits = map[string]int64{} // the largest limit asked, by list kind
	)
	watched := interceptor.NewClient(watchable(t, env.Source.Config), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if u, ok := list.(*unstructured.UnstructuredList); ok {
				o := (&client.ListOptions{}).ApplyOptions(opts)
				mu.Lock()
				limits[u.GetKind()] = max(limits[u.GetKind()], o.Limit)
				mu.Unlock()
			}
			return c.List(ctx, list, opts...)
		},
	})
	if err := move.CheckProvisioned(ctx, watched, p); err != nil {
		t.Fatalf("CheckProvisioned: %v", err)
	}
	for _, kind := range []string{"ClusterList", "MachineList"} {
		limit, listed := limits[kind]
		if !listed || limit <= 0 || limit > graph.FullPageSize {
			t.Errorf("%s listed %v with a limit of %d, want pages of at most %d", kind, listed, limit, graph.FullPageSize)
		}
	}
}
