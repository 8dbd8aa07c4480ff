package graph

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/listing"
)

// DefaultPageSize is how many objects one LIST request returns: large enough
// that a fleet of thousands of objects takes a few requests per kind, small
// enough that one page of large Secrets stays a few megabytes.
const DefaultPageSize = 500

// FullPageSize bounds the pages of the kinds read whole (Clusters,
// ClusterClasses, ClusterResourceSetBindings). A Cluster with a topology,
// decoded, takes tens of kilobytes: at 1,000 workload clusters two pages of
// 500 (the one handled and the one read ahead) were most of the plan's
// peak heap. At 50 a fleet of 1,000 Clusters takes 20 requests instead of 2.
const FullPageSize = 50

var (
	crdListGVK      = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"}
	providerListGVK = schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"}
)

// DiscoverTypes returns the kinds a move considers in a cluster: every CRD
// labelled clusterctl.cluster.x-k8s.io, at its storage version, plus Secret
// and ConfigMap.
//
// The reader must read from the API server, not from a cache.
func DiscoverTypes(ctx context.Context, c client.Reader) (*Types, error) {
	var crds []apiextensionsv1.CustomResourceDefinition
	err := listPages(ctx, c, crdListGVK, false, DefaultPageSize, []client.ListOption{client.HasLabels{ClusterctlLabel}},
		func(obj client.Object) error {
			crd := apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &crd); err != nil {
				return fmt.Errorf("reading CRD %s: %w", obj.GetName(), err)
			}
			crds = append(crds, crd)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("listing the CRDs labelled %s: %w", ClusterctlLabel, err)
	}
	return TypesFromCRDs(crds)
}

// DiscoverOptions narrows what Discover reads.
type DiscoverOptions struct {
	// Namespaces to move; empty means every namespace.
	Namespaces []string
	// PageSize is the limit of each LIST request; DefaultPageSize when zero.
	PageSize int64
	// Concurrency bounds the LIST requests in flight;
	// DefaultListConcurrency when zero.
	Concurrency int
}

// DefaultListConcurrency is how many kinds Discover lists at once. A plan
// reads every kind of every provider in every moved namespace (about 45
// kinds per namespace); one after the other, a restarted operator spent a
// second or two reading the plan again before its first write.
const DefaultListConcurrency = 8

// Discover reads the objects of the given kinds and returns their graph. It
// reads, in the namespaces to move (all when none are given), every object
// of every kind, at the kind's storage version and page by page, keeping
// only what the rules need of each. Beyond those namespaces it reads, as
// clusterctl does: the Clusters of every namespace (to know which of them
// still use a ClusterClass that moves), the Secrets of the infrastructure
// providers' namespaces (credentials of global identities), and the
// ClusterClasses that moved Clusters use from other namespaces, with their
// templates.
//
// The reader must read from the API server, not from a cache: a cache would
// start an informer per kind and hold every object in memory.
func Discover(ctx context.Context, c client.Reader, ts *Types, opts DiscoverOptions) (*Graph, error) {
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	concurrency := opts.Concurrency
	if concurrency <= 0 {
		concurrency = DefaultListConcurrency
	}
	g := New(ts, opts.Namespaces)
	namespaces := g.Namespaces()
	if err := listKinds(ctx, c, g, namespaces, pageSize, concurrency); err != nil {
		return nil, err
	}

	if len(namespaces) > 0 {
		if err := discoverProviderSecrets(ctx, c, g, pageSize); err != nil {
			return nil, err
		}
		if err := discoverExternalClusterClasses(ctx, c, g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// listKinds adds to g every object of every kind of g's types in the
// namespaces (all when there are none; the Clusters of all in any case),
// with at most concurrency lists in flight: one after the other, they took
// a restarted operator a second or two before its first write.
func listKinds(ctx context.Context, c client.Reader, g *Graph, namespaces []string, pageSize int64, concurrency int) error {
	// Lists run concurrently; the graph is built under one lock (adding is
	// keyed by UID, so the order of the lists does not matter).
	var mu sync.Mutex
	add := func(obj client.Object) error {
		mu.Lock()
		defer mu.Unlock()
		return g.Add(obj)
	}
	lists, listCtx := errgroup.WithContext(ctx)
	lists.SetLimit(concurrency)
	for _, typ := range g.types.All() {
		gk := typ.GVK.GroupKind()
		listGVK := typ.GVK.GroupVersion().WithKind(typ.GVK.Kind + "List")
		full := readWhole(gk)
		size := pageSize
		if full {
			size = min(size, FullPageSize)
		}
		if gk == ClusterGroupKind {
			mu.Lock()
			g.MarkListed(gk, "")
			mu.Unlock()
		}
		for _, ns := range listScopes(typ, namespaces) {
			var listOpts []client.ListOption
			if ns != "" {
				listOpts = append(listOpts, client.InNamespace(ns))
			}
			lists.Go(func() error {
				if err := listPages(listCtx, c, listGVK, !full, size, listOpts, add); err != nil {
					return fmt.Errorf("listing %s%s: %w", KindString(gk), inNamespace(ns), err)
				}
				return nil
			})
		}
	}
	return lists.Wait()
}

// readWhole says whether the objects of a kind are read whole. Only these
// kinds need more than metadata: reading every other kind as metadata
// keeps large Secrets and specs off the wire and out of memory.
func readWhole(gk schema.GroupKind) bool {
	return gk == ClusterGroupKind || gk == ClusterClassGroupKind || gk == ClusterResourceSetBindingGroupKind
}

// listScopes returns the namespaces a kind is listed in, "" standing for
// all of them (or for a cluster-scoped kind). Clusters are listed in every
// namespace whatever moves, to know which of them still use a ClusterClass
// that moves.
func listScopes(typ *Type, namespaces []string) []string {
	if typ.Namespaced && len(namespaces) > 0 && typ.GVK.GroupKind() != ClusterGroupKind {
		return namespaces
	}
	return []string{""}
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// discoverProviderSecrets reads the Secrets of the namespaces clusterctl
// installed infrastructure providers in: a global identity's credentials
// live there, and move with the identity.
func discoverProviderSecrets(ctx context.Context, c client.Reader, g *Graph, pageSize int64) error {
	var providerNamespaces []string
	err := listPages(ctx, c, providerListGVK, false, pageSize, nil, func(obj client.Object) error {
		u := obj.(*unstructured.Unstructured)
		if t, _, _ := unstructured.NestedString(u.Object, "type"); t == "InfrastructureProvider" && !slices.Contains(providerNamespaces, u.GetNamespace()) {
			providerNamespaces = append(providerNamespaces, u.GetNamespace())
		}
		return nil
	})
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		// No clusterctl inventory: no provider namespaces to read.
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing the clusterctl providers: %w", err)
	}
	slices.Sort(providerNamespaces)
	secretType, _ := g.types.Lookup(SecretGroupKind)
	for _, ns := range providerNamespaces {
		if g.namespaces[ns] {
			continue
		}
		listGVK := secretType.GVK.GroupVersion().WithKind("SecretList")
		if err := listPages(ctx, c, listGVK, true, pageSize, []client.ListOption{client.InNamespace(ns)}, g.Add); err != nil {
			return fmt.Errorf("listing Secrets in provider namespace %s: %w", ns, err)
		}
		g.MarkListed(SecretGroupKind, ns)
	}
	return nil
}

// discoverExternalClusterClasses reads the ClusterClasses that Clusters in
// scope use from other namespaces, and the templates they reference, so that
// they move (and stay in the source) with the Clusters that need them.
func discoverExternalClusterClasses(ctx context.Context, c client.Reader, g *Graph) error {
	classType, ok := g.types.Lookup(ClusterClassGroupKind)
	if !ok {
		return nil
	}
	seen := map[objectKey]bool{}
	for _, n := range g.sortedNodes() {
		if !n.isCluster() || n.spec().classRef == nil || !g.inScope(n) || g.namespaces[n.spec().classRef.namespace] || seen[*n.spec().classRef] {
			continue
		}
		key := *n.spec().classRef
		seen[key] = true
		class := &unstructured.Unstructured{}
		class.SetGroupVersionKind(classType.GVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: key.name}, class); err != nil {
			if apierrors.IsNotFound(err) {
				continue // link warns about the missing class
			}
			return fmt.Errorf("reading %s used by %s: %w", key, n.ref, err)
		}
		if err := g.Add(class); err != nil {
			return err
		}
		for _, ref := range templateRefs(class) {
			typ, ok := g.types.Lookup(ref.gk)
			if !ok {
				continue // link warns about the kind
			}
			template := &metav1.PartialObjectMetadata{}
			template.SetGroupVersionKind(typ.GVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: ref.namespace, Name: ref.name}, template); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading %s referenced by %s: %w", ref, key, err)
			}
			if err := g.Add(template); err != nil {
				return err
			}
		}
	}
	return nil
}

// listPages lists the objects of a kind page by page, as metadata only when
// metadataOnly is set, and calls each for every object, once. Each page is
// dropped once handled, so memory holds a page or two at a time. A continue
// token that expired restarts the listing (see listing.Each).
func listPages(ctx context.Context, c client.Reader, listGVK schema.GroupVersionKind, metadataOnly bool, pageSize int64,
	opts []client.ListOption, each func(client.Object) error) error {
	newList := func() client.ObjectList {
		if metadataOnly {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(listGVK)
			return l
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		return l
	}
	itemGVK := listGVK.GroupVersion().WithKind(listGVK.Kind[:len(listGVK.Kind)-len("List")])
	return listing.Each(ctx, listing.Request{List: c.List, NewList: newList, PageSize: pageSize, Options: opts}, func(obj client.Object) error {
		// Items of a metadata list carry no kind of their own.
		obj.GetObjectKind().SetGroupVersionKind(itemGVK)
		return each(obj)
	})
}
