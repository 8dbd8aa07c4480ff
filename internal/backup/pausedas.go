package backup

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// pausedAs reads Clusters and ClusterClasses that are paused, and say by
// whom nowhere, as paused by operation: clusterctl's backups pause every
// Cluster they write and name nobody, and its restore resumes them all.
type pausedAs struct {
	client.Reader
	operation string
}

func (r pausedAs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	r.mark(obj)
	return nil
}

func (r pausedAs) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			r.mark(obj)
		}
		return nil
	})
}

func (r pausedAs) mark(obj client.Object) {
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	if gk != graph.ClusterGroupKind && gk != graph.ClusterClassGroupKind {
		return
	}
	annotations := obj.GetAnnotations()
	if annotations[movev1alpha1.PausedByAnnotation] != "" {
		return
	}
	_, paused := annotations[graph.PausedAnnotation]
	if u, ok := obj.(*unstructured.Unstructured); ok && gk == graph.ClusterGroupKind {
		specPaused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
		paused = paused || specPaused
	}
	if !paused {
		return
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[movev1alpha1.PausedByAnnotation] = r.operation
	obj.SetAnnotations(annotations)
}
