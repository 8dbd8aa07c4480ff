package capiprovider

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// indexedReader answers the field-selector LISTs the real webhooks make
// against their manager's cache indexes: the API server supports no field
// selectors on custom resources, so a direct client would fail them with
// "field label not supported". It lists everything and filters with the
// same index function Cluster API registers.
type indexedReader struct {
	client.Reader
}

func (r indexedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	clusters, ok := list.(*clusterv1.ClusterList)
	if !ok || o.FieldSelector == nil || o.FieldSelector.Empty() {
		return r.Reader.List(ctx, list, opts...)
	}
	want, found := o.FieldSelector.RequiresExactMatch(index.ClusterClassRefPath)
	if !found {
		return fmt.Errorf("indexedReader: unsupported field selector %q", o.FieldSelector)
	}
	rest := *o
	rest.FieldSelector = fields.Everything()
	all := &clusterv1.ClusterList{}
	if err := r.Reader.List(ctx, all, &rest); err != nil {
		return err
	}
	clusters.Items = nil
	for i := range all.Items {
		for _, key := range index.ClusterByClusterClassRef(&all.Items[i]) {
			if key == want {
				clusters.Items = append(clusters.Items, all.Items[i])
			}
		}
	}
	return nil
}
