package archive

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader returns the archive as a client.Reader: what a restore plans from
// and copies from, as a move reads its source cluster. It serves Get and
// List of unstructured and metadata-only objects by group and kind; an
// object is served at the version the archive holds it in (the restore
// checks that the cluster it writes to serves that version). Lists are
// narrowed by namespace and label selector, and come in pages of the
// limit asked for (one page without one): each object is read from the
// archive as it is served, so what a reader holds is its page.
func (a *Archive) Reader() client.Reader { return archiveReader{a} }

type archiveReader struct{ a *Archive }

var _ client.Reader = archiveReader{}

func (r archiveReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	_, byKey := r.a.indexed()
	if i, ok := byKey[objectKey{gvk.GroupKind(), key.Namespace, key.Name}]; ok {
		o, err := r.a.Object(i)
		if err != nil {
			return err
		}
		return fill(o, obj)
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
}

// List serves the objects of a kind in the order they were written. A
// continue token is the place in that order of the next object to serve.
func (r archiveReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	gvk := list.GetObjectKind().GroupVersionKind()
	gk := schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}
	byKind, _ := r.a.indexed()
	entries := byKind[gk]
	start := 0
	if lo.Continue != "" {
		n, err := strconv.Atoi(lo.Continue)
		if err != nil || n < 0 || n > len(entries) {
			return apierrors.NewBadRequest(fmt.Sprintf("%q is not a continue token of this archive", lo.Continue))
		}
		start = n
	}
	var items []runtime.Object
	next := ""
	for k := start; k < len(entries); k++ {
		if lo.Limit > 0 && int64(len(items)) == lo.Limit {
			next = strconv.Itoa(k)
			break
		}
		e := r.a.Index.Objects[entries[k]]
		if lo.Namespace != "" && e.Namespace != lo.Namespace {
			continue
		}
		o, err := r.a.Object(entries[k])
		if err != nil {
			return err
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		item, err := newItem(list)
		if err != nil {
			return err
		}
		if err := fill(o, item); err != nil {
			return err
		}
		items = append(items, item)
	}
	if err := meta.SetList(list, items); err != nil {
		return err
	}
	if la, ok := list.(metav1.ListInterface); ok {
		la.SetContinue(next)
	}
	return nil
}

// newItem returns an empty item of the list's type.
func newItem(list client.ObjectList) (client.Object, error) {
	switch list.(type) {
	case *unstructured.UnstructuredList:
		return &unstructured.Unstructured{}, nil
	case *metav1.PartialObjectMetadataList:
		return &metav1.PartialObjectMetadata{}, nil
	}
	return nil, fmt.Errorf("an archive lists unstructured or metadata-only objects, not %T", list)
}

// fill gives o to obj: whole to an unstructured object, its metadata to a
// metadata-only one. o is read for this call alone, and not used after.
func fill(o *unstructured.Unstructured, obj client.Object) error {
	switch out := obj.(type) {
	case *unstructured.Unstructured:
		out.Object = o.Object
		return nil
	case *metav1.PartialObjectMetadata:
		out.TypeMeta = metav1.TypeMeta{APIVersion: o.GetAPIVersion(), Kind: o.GetKind()}
		md, _ := o.Object["metadata"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &out.ObjectMeta); err != nil {
			return fmt.Errorf("reading the metadata of %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		return nil
	}
	return fmt.Errorf("an archive reads into unstructured or metadata-only objects, not %T", obj)
}
