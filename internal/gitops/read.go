package gitops

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/listing"
)

// Detect reads the labels and annotations of the plan's objects and returns
// their GitOps managers, with how many of the plan's objects any manages.
//
// The plan keeps no labels of most objects (the graph stays small however
// large the objects are): Detect lists again, as metadata only, each kind
// of the plan in each of its namespaces (graph.DefaultListConcurrency lists
// at a time, as discovery does), and counts the managers of the plan's
// objects page by page. It keeps counts, not objects: an object kept would
// keep its whole page of metadata (managed fields included) alive, and at
// 1,000 workload clusters the fleet's pages were most of the operator's
// peak heap.
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
	var (
		mu     sync.Mutex
		counts tally
	)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(graph.DefaultListConcurrency)
	for _, s := range scopes {
		g.Go(func() error {
			var opts []client.ListOption
			if s.namespace != "" {
				opts = append(opts, client.InNamespace(s.namespace))
			}
			newList := func() client.ObjectList {
				list := &metav1.PartialObjectMetadataList{}
				list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
				return list
			}
			r := listing.Request{List: c.List, NewList: newList, PageSize: graph.DefaultPageSize, Options: opts}
			err := listing.Each(ctx, r, func(o client.Object) error {
				if _, moved := plan.Object(o.GetUID()); moved {
					mu.Lock()
					counts.add(o)
					mu.Unlock()
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("reading the labels of %s in %q: %w", graph.KindString(s.gvk.GroupKind()), s.namespace, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	managed, n := counts.result()
	return managed, n, nil
}

// Manager is a GitOps manager of moved objects as found in the source.
type Manager struct {
	Ref
	// Objects is how many moved objects it manages.
	Objects int
	// State is what it does: Reconciling, Suspended or NotFound.
	State movev1alpha1.GitOpsManagerState
	// Manages are the managers of moved objects that it applies, for a
	// manager of managers (an Argo CD app of apps), sorted.
	Manages []Ref
}

// Resolve looks the managers up in the cluster: whether each exists, and
// whether it applies its source by itself. An Argo CD Application its
// objects name without a namespace is looked for in every namespace; when
// several namespaces hold one of that name, each is a manager, since the
// labels cannot tell which Argo CD instance wrote them.
//
// Whatever applies an Application found is a manager too, and so on up:
// the Application's manifest holds the automated sync policy that a
// suspension removes, and its parent (an app of apps, or a Flux
// Kustomization) would put it back at its next sync. A Flux Kustomization
// or HelmRelease is not followed up: its parent applies it by server-side
// apply, which leaves spec.suspend alone unless the manifest sets it.
func Resolve(ctx context.Context, c client.Reader, managed []Managed) ([]Manager, error) {
	versions := versionCache{}
	byRef := map[Ref]*Manager{}
	add := func(ref Ref, objects int, state movev1alpha1.GitOpsManagerState, child *Ref) (added bool) {
		m, known := byRef[ref]
		if !known {
			m = &Manager{Ref: ref, State: state}
			byRef[ref] = m
		}
		m.Objects += objects
		if child != nil && !slices.Contains(m.Manages, *child) {
			m.Manages = append(m.Manages, *child)
		}
		return !known
	}
	type lookup struct {
		Managed
		// child is the manager this one applies, for a parent.
		child *Ref
	}
	queue := make([]lookup, 0, len(managed))
	for _, m := range managed {
		queue = append(queue, lookup{Managed: m})
	}
	for i := 0; i < len(queue); i++ {
		l := queue[i]
		found, err := find(ctx, c, versions, l.Ref)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			add(l.Ref, l.Objects, movev1alpha1.GitOpsNotFound, l.child)
			continue
		}
		k := kindOf(l.GroupKind)
		for _, u := range found {
			state := movev1alpha1.GitOpsReconciling
			if k.suspended(u) {
				state = movev1alpha1.GitOpsSuspended
			}
			ref := Ref{GroupKind: l.GroupKind, Namespace: u.GetNamespace(), Name: u.GetName()}
			// Each manager is followed up once, which also ends cycles.
			if !add(ref, l.Objects, state, l.child) || l.GroupKind != ApplicationKind {
				continue
			}
			for _, parent := range ManagersOf(u) {
				queue = append(queue, lookup{Managed: Managed{Ref: parent}, child: &ref})
			}
		}
	}
	out := make([]Manager, 0, len(byRef))
	for _, m := range byRef {
		slices.SortFunc(m.Manages, compareRefs)
		out = append(out, *m)
	}
	slicesSortManagers(out)
	return out, nil
}

// find returns the managers a reference names: none when it does not exist
// (or its CRD is not installed), several for an Argo CD Application named
// without a namespace that more than one namespace holds.
func find(ctx context.Context, c client.Reader, versions versionCache, ref Ref) ([]*unstructured.Unstructured, error) {
	k := kindOf(ref.GroupKind)
	if k == nil {
		return nil, nil
	}
	gvk, installed, err := versions.storageVersion(ctx, c, k)
	if err != nil || !installed {
		return nil, err
	}
	if ref.Namespace == "" {
		all, err := listAll(ctx, c, gvk)
		if err != nil {
			return nil, err
		}
		var found []*unstructured.Unstructured
		for _, u := range all {
			if u.GetName() == ref.Name {
				found = append(found, u)
			}
		}
		return found, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	return []*unstructured.Unstructured{u}, nil
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
	newList := func() client.ObjectList {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return list
	}
	r := listing.Request{List: c.List, NewList: newList, PageSize: graph.DefaultPageSize}
	err := listing.Each(ctx, r, func(o client.Object) error {
		out = append(out, o.(*unstructured.Unstructured))
		return nil
	})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", KindString(gvk.GroupKind()), err)
	}
	return out, nil
}
