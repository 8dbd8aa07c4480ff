package move

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// pageSize is the limit of the LIST requests of this package.
const pageSize = 500

var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// Label labels every object of the plan with OperationLabel=operation: the
// mark the webhook bypass matches, the mark that tells a resumed move which
// objects it takes, and the mark by which the target's copies are known as
// this operation's. Objects already labelled are skipped; an object labelled
// by another operation is an error naming it (another move holds it). It
// returns how many objects it labelled.
func Label(ctx context.Context, c client.Client, plan *graph.Plan, operation string, opts Options) (int, error) {
	var toLabel []*graph.Object
	var taken []string
	for _, o := range plan.Objects() {
		switch o.OperationLabel {
		case operation:
		case "":
			toLabel = append(toLabel, o)
		default:
			taken = append(taken, fmt.Sprintf("%s (operation %s)", o.ObjectRef, o.OperationLabel))
		}
	}
	if len(taken) > 0 {
		return 0, fmt.Errorf("labelling the objects to move: %d are labelled by another operation: %v", len(taken), taken)
	}
	err := forEach(ctx, toLabel, opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
		err := setLabel(ctx, c, o.ObjectRef, operation)
		if err != nil && !gone(err) {
			// An object gone since the plan was made is not an error here:
			// the plan rebuilt after labelling no longer holds it.
			return fmt.Errorf("labelling %s: %w", o.ObjectRef, err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("labelling the objects to move: %w", err)
	}
	return len(toLabel), nil
}

// setLabel sets (a value) or removes (nil) the operation label on one object.
// The patch names the object's UID, so it never lands on an object that
// replaced the one planned.
func setLabel(ctx context.Context, c client.Client, ref graph.ObjectRef, value any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":    ref.UID,
		"labels": map[string]any{movev1.OperationLabel: value},
	}})
	if err != nil {
		return err
	}
	obj := metadataObject(ref.GVK, ref.Namespace, ref.Name)
	return retry(ctx, func() error { return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)) })
}

// Unlabel removes the operation label from every object of the given kinds,
// and every namespace, that carries it in the cluster, found by listing
// with a label selector so that it needs no plan: after the move the
// target's copies are the ones to unlabel. In the target this update goes
// through the providers' admission webhooks once the bypass is gone: a last
// validation of what was moved, whose refusal is an error naming the object.
// It returns how many objects it unlabelled.
func Unlabel(ctx context.Context, c client.Client, ts *graph.Types, operation string, opts Options) (int, error) {
	labelled, err := Labelled(ctx, c, ts, operation)
	if err != nil {
		return 0, err
	}
	err = forEach(ctx, labelled, opts.concurrency(), func(ctx context.Context, ref graph.ObjectRef) error {
		if err := setLabel(ctx, c, ref, nil); err != nil && !gone(err) {
			return fmt.Errorf("unlabelling %s: %w", ref, err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("unlabelling the moved objects: %w", err)
	}
	return len(labelled), nil
}

// Labelled returns every object of the given kinds, and every namespace,
// that carries the operation label in the cluster, namespaces last.
func Labelled(ctx context.Context, c client.Reader, ts *graph.Types, operation string) ([]graph.ObjectRef, error) {
	selector := labels.SelectorFromSet(labels.Set{movev1.OperationLabel: operation})
	var refs []graph.ObjectRef
	gvks := make([]schema.GroupVersionKind, 0, len(ts.All())+1)
	for _, typ := range ts.All() {
		gvks = append(gvks, typ.GVK)
	}
	gvks = append(gvks, namespaceGVK)
	for _, gvk := range gvks {
		err := listMetadata(ctx, c, gvk, []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}, func(obj client.Object) error {
			refs = append(refs, graph.ObjectRef{GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s labelled by the operation: %w", graph.KindString(gvk.GroupKind()), err)
		}
	}
	return refs, nil
}

// listMetadata lists the objects of a kind as metadata, page by page, in
// every namespace unless the options narrow it, and calls each for every
// object.
func listMetadata(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, opts []client.ListOption, each func(client.Object) error) error {
	token := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		listOpts := append(slices.Clone(opts), client.Limit(pageSize), client.Continue(token))
		if err := retry(ctx, func() error { return c.List(ctx, list, listOpts...) }); err != nil {
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
