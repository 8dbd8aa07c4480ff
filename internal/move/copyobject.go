package move

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// copied is a copy this operation made (or made before a restart) of one
// object: what is left to write once the whole group exists.
type copied struct {
	object    *graph.Object
	targetUID types.UID
	// linkRefs are the owner references to set once the owners, created in
	// the same group, exist: as in the source, UIDs still the source's.
	linkRefs []metav1.OwnerReference
	// owners are the source UIDs of the owners the copy references.
	owners        map[types.UID]bool
	managedFields []metav1.ManagedFieldsEntry
	// status is what to write to the copy's status, or nil
	// (statusToCopy): the copy's own map, its UIDs the source's until
	// copyStatus rewrites them in place.
	status map[string]any
	// waitsFor is the last group holding a moved object the status names
	// that was not copied yet, or -1: the copy is finished once that group
	// is copied.
	waitsFor int
}

// copyObject creates one object in the target, and returns whether it
// created it, and, when the copy is this operation's, what is left to write
// (nil for an object used as found). src is the object as read from the
// source, or nil to read it here.
func (c *Copier) copyObject(ctx context.Context, o *graph.Object, src *unstructured.Unstructured) (bool, *copied, error) {
	src, err := c.readSource(ctx, o, src)
	if err != nil {
		return false, nil, err
	}
	owners, err := c.ownersOf(ctx, o, src)
	if err != nil {
		return false, nil, err
	}

	// What an earlier move recorded of its copy, read before prepare takes
	// src over.
	prov, hasProv := ProvenanceOf(src)
	srcContent := ""
	if hasProv {
		srcContent = ContentHash(src)
	}
	if o.FoundInTarget {
		uid, err := c.foundUID(ctx, o)
		if err != nil {
			return false, nil, err
		}
		c.uids.record(o.UID, uid)
		return false, nil, nil
	}
	// Converted once it is known to be copied: the conversion decodes the
	// whole object into Cluster API's Go types.
	src, err = c.toTargetVersion(ctx, o, src)
	if err != nil {
		return false, nil, err
	}
	obj, managedFields := prepare(src, owners.targetUIDs, owners.apiVersions)

	created, targetGeneration, asFound, err := c.createInTarget(ctx, o, obj, prov, hasProv && srcContent == prov.Content)
	if err != nil || asFound {
		return false, nil, err
	}
	c.uids.record(o.UID, obj.GetUID())

	// The status and the managed fields wait for the owners of the same
	// group, and for the group's copies to be recorded: a write that sets
	// the managed fields along with other changes gives those changes to
	// the operator.
	d := &copied{object: o, targetUID: obj.GetUID(), owners: owners.moving, managedFields: managedFields, waitsFor: -1}
	if d.status = c.statusToCopy(o, src, targetGeneration); d.status != nil {
		d.waitsFor = c.waitsFor(o, d.status)
	}
	if len(owners.sameGroup) > 0 {
		d.linkRefs = allOwnerRefs(obj, owners.sameGroup)
	}
	return created, d, nil
}

// readSource returns src, or, when it is nil, the object read from the
// source; either way it checks that it is the object the plan saw, and
// returns a *VanishedError when it is not there any more.
func (c *Copier) readSource(ctx context.Context, o *graph.Object, src *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if src == nil {
		src = &unstructured.Unstructured{}
		src.SetGroupVersionKind(o.GVK)
		err := retryTransient(ctx, func() error { return c.source.Get(ctx, o.Key(), src, readAtLeast(o.ResourceVersion)) })
		if apierrors.IsNotFound(err) {
			return nil, &VanishedError{Object: o.ObjectRef}
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s from the source: %w", o.ObjectRef, err)
		}
	}
	if src.GetUID() != o.UID {
		return nil, &VanishedError{Object: o.ObjectRef, ReplacedBy: src.GetUID()}
	}
	return src, nil
}

// copyOwners sorts the owner references of an object being copied by how
// its copy gets them.
type copyOwners struct {
	// targetUIDs maps the source UIDs of owners in other groups, already
	// copied, to their copies' UIDs.
	targetUIDs map[types.UID]types.UID
	// sameGroup are the references to owners copied with the object, whose
	// target UIDs are known only once the group is copied.
	sameGroup []metav1.OwnerReference
	// moving are the source UIDs of the owners the copy references, which
	// its managed fields may name.
	moving map[types.UID]bool
	// apiVersions are, by source UID, the apiVersions of the references
	// to owners in other groups whose kinds the move converts: the
	// version the target stores them at (see ownerAPIVersion).
	apiVersions map[types.UID]string
}

// ownersOf sorts src's owner references. An owner that does not move is
// left out: the plan reported it, and it does not exist in the target.
func (c *Copier) ownersOf(ctx context.Context, o *graph.Object, src *unstructured.Unstructured) (copyOwners, error) {
	owners := copyOwners{targetUIDs: map[types.UID]types.UID{}, moving: map[types.UID]bool{}, apiVersions: map[types.UID]string{}}
	for _, ref := range src.GetOwnerReferences() {
		owner, moves := c.plan.Object(ref.UID)
		if moves {
			owners.moving[ref.UID] = true
		}
		switch {
		case !moves:
		case owner.Group == o.Group:
			owners.sameGroup = append(owners.sameGroup, ref)
		default:
			uid, err := c.uids.of(ctx, owner)
			if err != nil {
				return copyOwners{}, fmt.Errorf("copying %s: %w", o.ObjectRef, err)
			}
			owners.targetUIDs[ref.UID] = uid
			owners.apiVersions[ref.UID] = c.ownerAPIVersion(owner, ref)
		}
	}
	return owners, nil
}

// createInTarget creates obj in the target. When the object already exists
// there, it is either this operation's copy (obj takes its UID and
// resourceVersion, to be written over) or used as found (its UID recorded,
// nothing of it ours to change), or a conflict. It returns whether it created
// obj, the generation of the object in the target, and whether the object is
// used as found. sourceUnchanged says whether src is as an earlier move
// recorded it in prov.
func (c *Copier) createInTarget(ctx context.Context, o *graph.Object, obj *unstructured.Unstructured, prov Provenance, sourceUnchanged bool) (created bool, generation int64, asFound bool, err error) {
	err = retryTransient(ctx, func() error { return c.target.Create(ctx, obj) })
	switch {
	case err == nil:
		return true, obj.GetGeneration(), false, nil
	case !apierrors.IsAlreadyExists(err):
		return false, 0, false, fmt.Errorf("creating %s in the target: %w", o.ObjectRef, err)
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(c.plan.TargetGVK(o.GVK))
	if err := retryTransient(ctx, func() error { return c.target.Get(ctx, o.Key(), existing) }); err != nil {
		return false, 0, false, fmt.Errorf("reading %s, which already exists in the target: %w", o.ObjectRef, err)
	}
	ours := c.isOurs(existing)
	if !ours && !o.Global && !o.InGlobalHierarchy {
		earlier, err := c.isEarlierCopy(ctx, o, prov, sourceUnchanged, existing.GetUID())
		if err != nil {
			return false, 0, false, err
		}
		if !earlier {
			return false, 0, false, &ConflictError{Object: o.ObjectRef}
		}
		// An earlier move's copy, unchanged on both sides: used as found.
		c.uids.record(o.UID, existing.GetUID())
		return false, 0, true, nil
	}
	if !ours {
		// Used as found: neither its managed fields nor its owners are ours to change.
		c.uids.record(o.UID, existing.GetUID())
		return false, 0, true, nil
	}
	obj.SetUID(existing.GetUID())
	obj.SetResourceVersion(existing.GetResourceVersion())
	return false, existing.GetGeneration(), false, nil
}

// isOurs reports whether an object found in the target is this operation's
// copy: it still carries the operation's field manager, or it was recorded
// as a copy, by an earlier run or by this one for the group it copies.
func (c *Copier) isOurs(existing metav1.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return IsCopyOf(existing, c.operation, c.uids.copies) || c.recorded[existing.GetUID()]
}

// isEarlierCopy reports whether the object found in the target is the copy
// an earlier move made of o, as o's provenance records, unchanged since; the
// source side was checked by the caller (sourceUnchanged).
func (c *Copier) isEarlierCopy(ctx context.Context, o *graph.Object, prov Provenance, sourceUnchanged bool, existing types.UID) (bool, error) {
	if !sourceUnchanged || c.targetID == "" || prov.Target != c.targetID || prov.Copy != existing {
		return false, nil
	}
	copied, err := getUnstructured(ctx, c.target, c.plan.InTarget(o.ObjectRef))
	if err != nil {
		return false, fmt.Errorf("reading %s, which an earlier move copied to the target: %w", o.ObjectRef, err)
	}
	return copied.GetUID() == existing && ContentHash(copied) == prov.Content, nil
}

// readAtLeast asks a GET for the object as new as the plan saw it, or newer.
// The API server then answers from its watch cache rather than with a
// quorum read from etcd, which it does for a GET without a resourceVersion;
// the object is the same, because the source's controllers are stopped and
// the plan was read after they were. Without a resourceVersion (a plan
// object not read from the cluster) it is a plain GET.
func readAtLeast(resourceVersion string) client.GetOption {
	return &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: resourceVersion}}
}

// allOwnerRefs returns the owner references an object must end up with: the
// rewritten ones it was created with, then the ones left to link.
func allOwnerRefs(obj *unstructured.Unstructured, later []metav1.OwnerReference) []metav1.OwnerReference {
	return append(obj.GetOwnerReferences(), later...)
}

// linkOwners sets the owner references of an object whose owners were
// created in its own group, now that their target UIDs are known. The patch
// names the object's UID, so it never lands on an object that replaced it.
func (c *Copier) linkOwners(ctx context.Context, d copied) error {
	refs := make([]metav1.OwnerReference, 0, len(d.linkRefs))
	for _, ref := range d.linkRefs {
		if owner, moves := c.plan.Object(ref.UID); moves {
			uid, err := c.uids.of(ctx, owner)
			if err != nil {
				return fmt.Errorf("linking the owners of %s: %w", d.object.ObjectRef, err)
			}
			ref.UID, ref.APIVersion = uid, c.ownerAPIVersion(owner, ref)
		}
		refs = append(refs, ref)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": d.targetUID, "ownerReferences": refs}})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(c.plan.TargetGVK(d.object.GVK))
	obj.SetNamespace(d.object.Namespace)
	obj.SetName(d.object.Name)
	if err := retryTransient(ctx, func() error { return c.target.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)) }); err != nil {
		return fmt.Errorf("linking the owners of %s in the target: %w", d.object.ObjectRef, err)
	}
	return nil
}

// restoreManagedFields gives a copy in the target every managed fields entry
// its source had, with the owner UIDs in their field paths rewritten to the
// target's, so that server-side-apply ownership is the same after the move:
// a create records the creator as the manager of every field, and a
// manager's next apply could then no longer remove a field it set, nor would
// the copy say who set what. It is one write per object with managed fields,
// and must be the last write of the copy: the API server keeps managed
// fields a request sets only when the request changes nothing else, and
// gives whatever else a write changes (owner references, status) to the
// writer. Redone on a resumed copy, it changes nothing. owners are the
// source UIDs of the owners the copy references; paths naming any other
// UID (owners that do not move, whose references the copy drops) are
// dropped. So are the entries written at another version than the one the
// target stores the kind at (managedFieldsAt): a copy of a converted
// object keeps none of its source's, and is left with no managed fields at
// all, as an object written before server-side apply existed.
func (c *Copier) restoreManagedFields(ctx context.Context, o *graph.Object, uid types.UID, owners map[types.UID]bool, source []metav1.ManagedFieldsEntry) error {
	if len(source) == 0 {
		return nil
	}
	to := c.plan.TargetGVK(o.GVK)
	fields, err := rewriteOwnerUIDs(managedFieldsAt(source, to.GroupVersion().String()), func(sourceUID types.UID) (types.UID, bool, error) {
		owner, moves := c.plan.Object(sourceUID)
		if !moves || !owners[sourceUID] {
			return "", false, nil
		}
		targetUID, err := c.uids.of(ctx, owner)
		return targetUID, err == nil, err
	})
	if err != nil {
		return fmt.Errorf("restoring the managed fields of %s in the target: %w", o.ObjectRef, err)
	}
	var managedFields any = fields
	if len(fields) == 0 {
		// One empty entry is how a write clears every managed field, the
		// operation's own entry with them.
		managedFields = []map[string]any{{}}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "managedFields": managedFields}})
	if err != nil {
		return err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(to)
	target.SetNamespace(o.Namespace)
	target.SetName(o.Name)
	if err := retryTransient(ctx, func() error { return c.target.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)) }); err != nil {
		return fmt.Errorf("restoring the managed fields of %s in the target: %w", o.ObjectRef, err)
	}
	return nil
}

// foundUID reads the UID of an object the target had when the plan was
// recorded.
func (c *Copier) foundUID(ctx context.Context, o *graph.Object) (types.UID, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(c.plan.TargetGVK(o.GVK))
	if err := retryTransient(ctx, func() error { return c.target.Get(ctx, o.Key(), obj) }); err != nil {
		return "", fmt.Errorf("reading %s, which the target had when the move began: %w", o.ObjectRef, err)
	}
	return obj.GetUID(), nil
}

// ensureNamespaces creates the namespaces of a group's objects that the
// target lacks, by the operation's field manager, so that a rollback knows
// them as its own. The first group also brings the namespaces the plan
// requires with nothing in them to move (graph.Plan.RequireNamespaces).
func (c *Copier) ensureNamespaces(ctx context.Context, group int, objects []*graph.Object) error {
	var names []string
	if group == 0 {
		names = c.plan.RequiredNamespaces()
	}
	for _, o := range objects {
		names = append(names, o.Namespace)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		c.mu.Lock()
		known := c.namespaces[name]
		c.mu.Unlock()
		if known {
			continue
		}
		if err := EnsureNamespace(ctx, c.target, name); err != nil {
			return err
		}
		c.mu.Lock()
		c.namespaces[name] = true
		c.mu.Unlock()
	}
	return nil
}

// EnsureNamespace creates a namespace in a cluster unless it exists. Made
// with a client of an operation's field manager (FieldOwner), it is known
// as that operation's by its managed fields.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	err := retryTransient(ctx, func() error { return c.Create(ctx, ns) })
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s in the target: %w", name, err)
	}
	return nil
}

// prepare returns the object to create in the target from its source copy
// (converted to the target's version when the target stores its kind at
// another): the same content without the fields the target assigns
// itself, with owner references to moved owners pointed at their target
// UIDs (ownerUIDs, by source UID), at the apiVersions given for them
// (apiVersions, by source UID; the reference's own when none), and the
// others dropped (owners of the same group are linked after the create).
// It also returns the source's managed fields, every entry, for
// restoreManagedFields. The source object is reused, not copied: the
// caller must not use it afterwards.
func prepare(src *unstructured.Unstructured, ownerUIDs map[types.UID]types.UID, apiVersions map[types.UID]string) (*unstructured.Unstructured, []metav1.ManagedFieldsEntry) {
	managedFields := src.GetManagedFields()

	var refs []metav1.OwnerReference
	for _, ref := range src.GetOwnerReferences() {
		if uid, ok := ownerUIDs[ref.UID]; ok {
			if v, ok := apiVersions[ref.UID]; ok {
				ref.APIVersion = v
			}
			ref.UID = uid
			refs = append(refs, ref)
		}
	}

	obj := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range src.Object {
		if k != "metadata" {
			obj.Object[k] = v
		}
	}
	obj.SetAPIVersion(src.GetAPIVersion())
	obj.SetKind(src.GetKind())
	obj.SetNamespace(src.GetNamespace())
	obj.SetName(src.GetName())
	// generateName is left out: the name is set, and an object with both
	// makes the API server answer a duplicate create with a timeout instead
	// of AlreadyExists (kubernetes/kubernetes#32220).
	obj.SetLabels(src.GetLabels())
	obj.SetAnnotations(copyAnnotations(src.GetAnnotations()))
	obj.SetFinalizers(src.GetFinalizers())
	obj.SetOwnerReferences(refs)
	return obj, managedFields
}
