package graph

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TypesCache keeps the kinds DiscoverTypes found in one cluster and reads
// the CRDs whole again only when one of them changed. Cluster API's CRDs
// carry their schemas, megabytes in all: listing them is the largest read
// of a small move, and a move discovers the kinds in most of its phases.
// Whether one changed is asked of the API server each time, with a list of
// the labelled CRDs' names and resource versions only: what Discover
// returns is always what DiscoverTypes would return now. The zero value is
// empty and ready; it is safe for concurrent use.
type TypesCache struct {
	mu       sync.Mutex
	versions map[string]string
	types    *Types
}

// Discover returns the kinds a move considers in the cluster c reads, as
// DiscoverTypes does. c must read from the API server.
func (tc *TypesCache) Discover(ctx context.Context, c client.Reader) (*Types, error) {
	versions := map[string]string{}
	err := listPages(ctx, c, crdListGVK, true, DefaultPageSize, []client.ListOption{client.HasLabels{ClusterctlLabel}},
		func(obj client.Object) error {
			versions[obj.GetName()] = obj.GetResourceVersion()
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("listing the CRDs labelled %s: %w", ClusterctlLabel, err)
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.types != nil && maps.Equal(versions, tc.versions) {
		return tc.types, nil
	}
	// Read after the versions: a CRD that changed in between makes the
	// next Discover read them whole again, never keeps older kinds.
	ts, err := DiscoverTypes(ctx, c)
	if err != nil {
		return nil, err
	}
	tc.versions, tc.types = versions, ts
	return ts, nil
}
