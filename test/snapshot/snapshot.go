package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterctlLabel marks the CRDs whose objects are Cluster API state.
const ClusterctlLabel = "clusterctl.cluster.x-k8s.io"

// Options select and shape what Take captures.
type Options struct {
	// Namespaces restricts namespaced objects to these namespaces. Empty
	// means every namespace. Cluster-scoped objects are always captured.
	Namespaces []string
	// Status captures statuses too.
	Status bool
	// IgnoreLabels and IgnoreAnnotations are keys left out of every object;
	// a key ending in "/" leaves out every key with that prefix.
	IgnoreLabels      []string
	IgnoreAnnotations []string
	// UpdateManagers captures the managed fields entries of Update
	// operations too, not only those of server-side apply. Their field sets
	// change with every write of their manager, so they compare only
	// clusters where no controller wrote since.
	UpdateManagers bool
	// IgnoreManagers are field managers whose entries are left out (a
	// move's own writes, such as its pause, in one cluster but not the
	// other).
	IgnoreManagers []string
}

// Snapshot is the captured state, objects sorted by kind, namespace and name.
type Snapshot struct {
	Objects []Object
}

// Object is the normalized form of one object.
type Object struct {
	// Kind is Kind.group, e.g. "Machine.cluster.x-k8s.io", or "Secret".
	Kind        string
	Namespace   string
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// Content is every top-level field but apiVersion, kind, metadata and
	// status: the spec, or the type and data of a Secret.
	Content map[string]any
	// Status is captured only with Options.Status.
	Status     any
	Owners     []Owner
	Finalizers []string
	// Managers are the managed fields entries of server-side apply (and of
	// updates with Options.UpdateManagers), sorted.
	Managers []Manager
	// Unresolved says which UIDs of the object name nothing: an owner
	// reference whose UID is not the UID of an object of that kind and name
	// in the cluster (found by Take), or a managed field path naming an
	// owner reference the object does not have.
	Unresolved []string
}

// Owner is an ownerReference without the owner's UID and version, which
// differ between clusters for the same logical owner.
type Owner struct {
	Kind               string
	Name               string
	Controller         bool
	BlockOwnerDeletion bool
}

// Manager is a managed fields entry without its time, which differs between
// clusters. Its field paths name owner references by the owner's kind and
// name instead of its UID: k:{"owner":"Kind.group/name"}.
type Manager struct {
	Manager     string
	Operation   string
	APIVersion  string
	Subresource string
	// Fields are the entry's field paths, one per member of its set, their
	// elements joined by dots, sorted.
	Fields []string
}

// Key identifies an object across clusters.
type Key struct {
	Kind, Namespace, Name string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// Key returns o's key.
func (o Object) Key() Key { return Key{o.Kind, o.Namespace, o.Name} }

// Get returns the object with key k.
func (s *Snapshot) Get(k Key) (Object, bool) {
	i := sort.Search(len(s.Objects), func(i int) bool { return !less(s.Objects[i].Key(), k) })
	if i < len(s.Objects) && s.Objects[i].Key() == k {
		return s.Objects[i], true
	}
	return Object{}, false
}

// Kinds counts the objects by kind.
func (s *Snapshot) Kinds() map[string]int {
	out := map[string]int{}
	for _, o := range s.Objects {
		out[o.Kind]++
	}
	return out
}

func less(a, b Key) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Take captures the Cluster API state c reads.
func Take(ctx context.Context, c client.Reader, opts Options) (*Snapshot, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.HasLabels{ClusterctlLabel}); err != nil {
		return nil, fmt.Errorf("listing the Cluster API CRDs: %w", err)
	}
	var kinds []listType
	for _, crd := range crds.Items {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				kinds = append(kinds, listType{
					gvk:        schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
					namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
				})
			}
		}
	}
	s := &Snapshot{}
	captured := map[string]bool{}      // kind/namespace/name, to find what they own
	uids := map[types.UID]string{}     // of every captured object, to resolve owners
	var refs [][]metav1.OwnerReference // of each object of s, in order
	for _, t := range kinds {
		items, err := list(ctx, c, t, opts.Namespaces)
		if err != nil {
			return nil, err
		}
		for i := range items {
			o := Normalize(&items[i], opts)
			s.Objects = append(s.Objects, o)
			captured[o.Kind+"/"+o.Namespace+"/"+o.Name] = true
			uids[items[i].GetUID()] = o.Kind + "/" + o.Name
			refs = append(refs, items[i].GetOwnerReferences())
		}
	}

	providerNamespaces, err := providerNamespaces(ctx, c)
	if err != nil {
		return nil, err
	}
	// Provider namespaces are scanned even when not asked for: what a
	// captured object owns there (an identity's credentials) moves with it.
	scan := opts.Namespaces
	if len(scan) > 0 {
		scan = append([]string{}, scan...)
		for ns := range providerNamespaces {
			if !contains(scan, ns) {
				scan = append(scan, ns)
			}
		}
	}
	for _, kind := range []string{"Secret", "ConfigMap"} {
		items, err := list(ctx, c, listType{gvk: corev1.SchemeGroupVersion.WithKind(kind), namespaced: true}, scan)
		if err != nil {
			return nil, err
		}
		for i := range items {
			u := &items[i]
			if isKubernetesManaged(u) {
				continue
			}
			// A provider's namespace holds its own machinery (webhook
			// certificates); only what a Cluster API object owns there is
			// state, like an identity's credentials.
			if providerNamespaces[u.GetNamespace()] && !ownedByCaptured(u, captured) {
				continue
			}
			o := Normalize(u, opts)
			s.Objects = append(s.Objects, o)
			uids[u.GetUID()] = o.Kind + "/" + o.Name
			refs = append(refs, u.GetOwnerReferences())
		}
	}
	if err := resolveOwners(ctx, c, s.Objects, refs, uids); err != nil {
		return nil, err
	}
	sort.Slice(s.Objects, func(i, j int) bool { return less(s.Objects[i].Key(), s.Objects[j].Key()) })
	return s, nil
}

type listType struct {
	gvk        schema.GroupVersionKind
	namespaced bool
}

func list(ctx context.Context, c client.Reader, t listType, namespaces []string) ([]unstructured.Unstructured, error) {
	scopes := []string{""}
	if t.namespaced && len(namespaces) > 0 {
		scopes = namespaces
	}
	var out []unstructured.Unstructured
	for _, ns := range scopes {
		cont := ""
		for {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(t.gvk.GroupVersion().WithKind(t.gvk.Kind + "List"))
			opts := []client.ListOption{client.Limit(500), client.Continue(cont)}
			if ns != "" {
				opts = append(opts, client.InNamespace(ns))
			}
			if err := c.List(ctx, l, opts...); err != nil {
				return nil, fmt.Errorf("listing %s: %w", t.gvk.GroupKind(), err)
			}
			out = append(out, l.Items...)
			if cont = l.GetContinue(); cont == "" {
				break
			}
		}
	}
	return out, nil
}

// providerNamespaces are the namespaces holding clusterctl inventory entries.
func providerNamespaces(ctx context.Context, c client.Reader) (map[string]bool, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	out := map[string]bool{}
	if err := c.List(ctx, l); err != nil {
		return nil, fmt.Errorf("listing the clusterctl inventory: %w", err)
	}
	for _, p := range l.Items {
		out[p.Namespace] = true
	}
	return out, nil
}

// isKubernetesManaged reports objects Kubernetes itself puts in every
// namespace, which are no one's Cluster API state.
func isKubernetesManaged(u *unstructured.Unstructured) bool {
	if u.GetKind() == "ConfigMap" && u.GetName() == "kube-root-ca.crt" {
		return true
	}
	t, _, _ := unstructured.NestedString(u.Object, "type")
	return u.GetKind() == "Secret" && t == string(corev1.SecretTypeServiceAccountToken)
}

// ownedByCaptured reports whether an owner of u, in u's namespace or
// cluster-scoped, was captured.
func ownedByCaptured(u *unstructured.Unstructured, captured map[string]bool) bool {
	for _, ref := range u.GetOwnerReferences() {
		kind := kindOf(ref.APIVersion, ref.Kind)
		if captured[kind+"/"+u.GetNamespace()+"/"+ref.Name] || captured[kind+"//"+ref.Name] {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func kindOf(apiVersion, kind string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Group == "" {
		return kind
	}
	return kind + "." + gv.Group
}

// Normalize turns an object into its comparable form.
func Normalize(u *unstructured.Unstructured, opts Options) Object {
	o := Object{
		Kind:        kindOf(u.GetAPIVersion(), u.GetKind()),
		Namespace:   u.GetNamespace(),
		Name:        u.GetName(),
		Labels:      without(u.GetLabels(), opts.IgnoreLabels),
		Annotations: without(u.GetAnnotations(), append([]string{corev1.LastAppliedConfigAnnotation}, opts.IgnoreAnnotations...)),
		Content:     map[string]any{},
	}
	for k, v := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata":
		case "status":
			if opts.Status {
				o.Status = v
			}
		default:
			o.Content[k] = v
		}
	}
	if u.GetKind() == "Secret" && u.GetAPIVersion() == "v1" {
		o.Content = redactSecret(o.Content)
	}
	for _, ref := range u.GetOwnerReferences() {
		o.Owners = append(o.Owners, Owner{
			Kind: kindOf(ref.APIVersion, ref.Kind), Name: ref.Name,
			Controller: ref.Controller != nil && *ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion,
		})
	}
	sort.Slice(o.Owners, func(i, j int) bool {
		a, b := o.Owners[i], o.Owners[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	if f := u.GetFinalizers(); len(f) > 0 {
		o.Finalizers = append([]string{}, f...)
		sort.Strings(o.Finalizers)
	}
	o.Managers, o.Unresolved = managers(u, opts)
	return o
}

func without(m map[string]string, ignore []string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if !ignored(k, ignore) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func ignored(key string, ignore []string) bool {
	for _, i := range ignore {
		if key == i || (strings.HasSuffix(i, "/") && strings.HasPrefix(key, i)) {
			return true
		}
	}
	return false
}

// redactSecret replaces each value of a Secret's data by a digest of it, so
// values are compared but never printed.
func redactSecret(content map[string]any) map[string]any {
	data, ok := content["data"].(map[string]any)
	if !ok {
		return content
	}
	redacted := map[string]any{}
	for k, v := range data {
		s, _ := v.(string)
		sum := sha256.Sum256([]byte(s))
		redacted[k] = "sha256:" + hex.EncodeToString(sum[:8])
	}
	out := map[string]any{}
	for k, v := range content {
		out[k] = v
	}
	out["data"] = redacted
	return out
}
