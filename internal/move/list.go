package move

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pageSize is the limit of the LIST requests of this package.
const pageSize = 500

var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// listMetadata lists the objects of a kind as metadata, page by page, in
// every namespace unless the options narrow it, and calls each for every
// object.
func listMetadata(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, opts []client.ListOption, each func(client.Object) error) error {
	token := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		listOpts := append(slices.Clone(opts), client.Limit(pageSize), client.Continue(token))
		if err := retryTransient(ctx, func() error { return c.List(ctx, list, listOpts...) }); err != nil {
			return err
		}
		err := meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return each(obj)
		})
		if err != nil {
			return err
		}
		token = list.GetContinue()
		if token == "" {
			return nil
		}
	}
}
