package gitops

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// Detect reads the labels and annotations of the plan's objects and returns
// their GitOps managers, with how many of the plan's objects any manages.
//
// The plan keeps no labels of most objects (the graph stays small however
// large the objects are): Detect lists again, as metadata only, each kind
// of the plan in each of its namespaces, and keeps the plan's objects.
func Detect(ctx context.Context, c client.Reader, plan *graph.Plan) ([]Managed, int, error) {
	type scope struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	var scopes []scope
	for _, o := range plan.Objects() {
		s := scope{gvk: o.GVK, namespace: o.Namespace}
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	var objects []metav1.Object
	for _, s := range scopes {
		opts := []client.ListOption{client.Limit(graph.DefaultPageSize)}
		if s.namespace != "" {
			opts = append(opts, client.InNamespace(s.namespace))
		}
		for {
			// A list per page: the objects kept point into its items.
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
			if err := c.List(ctx, list, opts...); err != nil {
				return nil, 0, fmt.Errorf("reading the labels of %s in %q: %w", graph.KindString(s.gvk.GroupKind()), s.namespace, err)
			}
			for i := range list.Items {
				o := &list.Items[i]
				if _, moved := plan.Object(o.UID); moved {
					objects = append(objects, o)
				}
			}
			if list.Continue == "" {
				break
			}
			opts = append(opts, client.Continue(list.Continue))
		}
	}
	managed, n := Count(objects)
	return managed, n, nil
}

// Manager is a GitOps manager of moved objects as found in the source.
type Manager struct {
	Ref
	// Objects is how many moved objects it manages.
	Objects int
	// State is what it does: Reconciling, Suspended or NotFound.
	State movev1.GitOpsManagerState
}

// Resolve looks the managers up in the cluster: whether each exists, and
// whether it applies its source by itself. An Argo CD Application its
// objects name without a namespace is looked for in every namespace; when
// several namespaces hold one of that name, each is a manager, since the
// labels cannot tell which Argo CD instance wrote them.
func Resolve(ctx context.Context, c client.Reader, managed []Managed) ([]Manager, error) {
	versions := versionCache{}
	var out []Manager
	for _, m := range managed {
		k := kindOf(m.GroupKind)
		gvk, installed, err := versions.storageVersion(ctx, c, k)
		if err != nil {
			return nil, err
		}
		if !installed {
			out = append(out, Manager{Ref: m.Ref, Objects: m.Objects, State: movev1.GitOpsNotFound})
			continue
		}
		var found []*unstructured.Unstructured
		if m.Namespace == "" {
			all, err := listAll(ctx, c, gvk)
			if err != nil {
				return nil, err
			}
			for _, u := range all {
				if u.GetName() == m.Name {
					found = append(found, u)
				}
			}
		} else {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, u)
			switch {
			case err == nil:
				found = append(found, u)
			case !apierrors.IsNotFound(err):
				return nil, fmt.Errorf("reading %s: %w", m.Ref, err)
			}
		}
		if len(found) == 0 {
			out = append(out, Manager{Ref: m.Ref, Objects: m.Objects, State: movev1.GitOpsNotFound})
			continue
		}
		for _, u := range found {
			state := movev1.GitOpsReconciling
			if k.suspended(u) {
				state = movev1.GitOpsSuspended
			}
			ref := Ref{GroupKind: m.GroupKind, Namespace: u.GetNamespace(), Name: u.GetName()}
			out = append(out, Manager{Ref: ref, Objects: m.Objects, State: state})
		}
	}
	slicesSortManagers(out)
	return out, nil
}

func slicesSortManagers(ms []Manager) {
	slices.SortFunc(ms, func(a, b Manager) int { return compareRefs(a.Ref, b.Ref) })
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// versionCache remembers, for one pass, at which version each kind of
// manager is stored, if its CRD is installed at all.
type versionCache map[schema.GroupKind]*schema.GroupVersionKind

// storageVersion returns the kind at its CRD's storage version, the version
// every read and write uses, so that no conversion can drop a field the
// record must put back. installed is false when the CRD does not exist:
// no manager of that kind exists in the cluster either.
func (vc versionCache) storageVersion(ctx context.Context, c client.Reader, k *kind) (gvk schema.GroupVersionKind, installed bool, err error) {
	if v, ok := vc[k.groupKind]; ok {
		if v == nil {
			return schema.GroupVersionKind{}, false, nil
		}
		return *v, true, nil
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := c.Get(ctx, types.NamespacedName{Name: k.crdName()}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			vc[k.groupKind] = nil
			return schema.GroupVersionKind{}, false, nil
		}
		return schema.GroupVersionKind{}, false, fmt.Errorf("reading CRD %s: %w", k.crdName(), err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if storage, _ := v["storage"].(bool); storage {
			name, _ := v["name"].(string)
			gvk := k.groupKind.WithVersion(name)
			vc[k.groupKind] = &gvk
			return gvk, true, nil
		}
	}
	return schema.GroupVersionKind{}, false, fmt.Errorf("CRD %s has no storage version", k.crdName())
}

// listAll lists every object of a kind in every namespace.
func listAll(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	opts := []client.ListOption{client.Limit(graph.DefaultPageSize)}
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("listing %s: %w", KindString(gvk.GroupKind()), err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts = append(opts, client.Continue(list.GetContinue()))
	}
}
