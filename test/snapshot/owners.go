package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// resolveOwners records, in each object, the owner references whose UID is
// not the UID of an object of that kind and name in the cluster: the
// captured objects are known by UID (uids, to kind/name), others are read.
// refs are the owner references of objects, in the same order.
func resolveOwners(ctx context.Context, c client.Reader, objects []Object, refs [][]metav1.OwnerReference, uids map[types.UID]string) error {
	read := map[string]types.UID{} // apiVersion/kind/namespace/name to UID, "" when absent
	for i := range objects {
		o := &objects[i]
		for _, ref := range refs[i] {
			if uids[ref.UID] == kindOf(ref.APIVersion, ref.Kind)+"/"+ref.Name {
				continue
			}
			// Not captured, or captured under another UID: the owner's
			// own namespace if it is namespaced, else cluster-scoped.
			key := ref.APIVersion + "/" + ref.Kind + "/" + o.Namespace + "/" + ref.Name
			uid, known := read[key]
			if !known {
				var err error
				if uid, err = readUID(ctx, c, ref, o.Namespace); err != nil {
					return fmt.Errorf("reading the owner %s %s of %s: %w", ref.Kind, ref.Name, o.Key(), err)
				}
				read[key] = uid
			}
			if uid != ref.UID {
				o.Unresolved = append(o.Unresolved, fmt.Sprintf("ownerReference to %s %s: no such object with its UID in the cluster", kindOf(ref.APIVersion, ref.Kind), ref.Name))
			}
		}
		sort.Strings(o.Unresolved)
	}
	return nil
}

// readUID returns the UID of the object an owner reference names, or ""
// when there is none (or its API version is not served).
func readUID(ctx context.Context, c client.Reader, ref metav1.OwnerReference, namespace string) (types.UID, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", nil
	}
	owner := &metav1.PartialObjectMetadata{}
	owner.SetGroupVersionKind(gv.WithKind(ref.Kind))
	// A namespaced owner lives in its dependent's namespace; the client
	// leaves the namespace out for a cluster-scoped kind.
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, owner)
	switch {
	case err == nil:
		return owner.GetUID(), nil
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		return "", nil
	default:
		return "", err
	}
}

// managers returns the managed fields entries to compare (Apply entries,
// and Update entries with opts.UpdateManagers), and which of their paths
// name an owner reference u does not have.
func managers(u *unstructured.Unstructured, opts Options) ([]Manager, []string) {
	owners := map[string]string{} // owner key k:{"uid":...} to k:{"owner":"Kind.group/name"}
	for _, ref := range u.GetOwnerReferences() {
		k, _ := json.Marshal(map[string]string{"uid": string(ref.UID)})
		name, _ := json.Marshal(map[string]string{"owner": kindOf(ref.APIVersion, ref.Kind) + "/" + ref.Name})
		owners["k:"+string(k)] = "k:" + string(name)
	}
	var out []Manager
	var unresolved []string
	for _, e := range u.GetManagedFields() {
		if (e.Operation != metav1.ManagedFieldsOperationApply && !opts.UpdateManagers) || contains(opts.IgnoreManagers, e.Manager) {
			continue
		}
		m := Manager{Manager: e.Manager, Operation: string(e.Operation), APIVersion: e.APIVersion, Subresource: e.Subresource}
		var fields map[string]any
		if e.FieldsV1 != nil && json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			m.Fields = []string{"unreadable: " + string(e.FieldsV1.GetRawBytes())}
		}
		flatten(nil, fields, func(path []string) {
			if len(path) > 2 && path[0] == "f:metadata" && path[1] == "f:ownerReferences" && strings.HasPrefix(path[2], "k:") {
				if name, ok := owners[path[2]]; ok {
					path[2] = name
				} else {
					path[2] = `k:{"owner":"?"}`
					unresolved = append(unresolved, fmt.Sprintf("managed fields of %s (%s) name an owner reference the object does not have", e.Manager, e.Operation))
				}
			}
			m.Fields = append(m.Fields, strings.Join(path, "."))
		})
		sort.Strings(m.Fields)
		m.Fields = compact(m.Fields)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Manager != b.Manager {
			return a.Manager < b.Manager
		}
		if a.Operation != b.Operation {
			return a.Operation < b.Operation
		}
		if a.Subresource != b.Subresource {
			return a.Subresource < b.Subresource
		}
		return a.APIVersion < b.APIVersion
	})
	sort.Strings(unresolved)
	return out, compact(unresolved)
}

// flatten calls leaf with the path of every member of a FieldsV1 set: a
// node whose "." key is present, or that has no children.
func flatten(path []string, node map[string]any, leaf func([]string)) {
	if len(path) > 0 {
		if _, self := node["."]; self || len(node) == 0 {
			leaf(append([]string{}, path...))
		}
	}
	for k, v := range node {
		if k == "." {
			continue
		}
		child, _ := v.(map[string]any)
		flatten(append(path, k), child, leaf)
	}
}

// compact drops repeated neighbours of a sorted list.
func compact(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	out := list[:1]
	for _, s := range list[1:] {
		if s != out[len(out)-1] {
			out = append(out, s)
		}
	}
	return out
}
