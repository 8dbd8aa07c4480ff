package move

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/listing"
)

// pageSize is the limit of the LIST requests of this package.
const pageSize = 500

var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// listMetadata lists the objects of a kind as metadata, page by page, in
// every namespace unless the options narrow it, and calls each for every
// object, once (see listing.Each).
func listMetadata(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, opts []client.ListOption, each func(client.Object) error) error {
	newList := func() client.ObjectList {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return list
	}
	r := listing.Request{List: retryingList(c), NewList: newList, PageSize: pageSize, Options: opts}
	return listing.Each(ctx, r, func(obj client.Object) error {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return each(obj)
	})
}

// retryingList is c's List, retried on transient errors.
func retryingList(c client.Reader) listing.ListFunc {
	return func(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
		return retryTransient(ctx, func() error { return c.List(ctx, list, opts...) })
	}
}
