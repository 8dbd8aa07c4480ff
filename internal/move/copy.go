package move

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/internal/graph"
)

// Copier creates the objects of a plan in the target, one creation group at
// a time. It remembers the target UID of every object it created or found,
// so that later groups rewrite their owner references without reading the
// owners back; a Copier built after a crash finds them by name instead.
// One Copier may copy every group of a move; it is safe for concurrent use.
type Copier struct {
	source, target client.Client
	plan           *graph.Plan
	operation      string
	opts           Options

	mu sync.Mutex
	// targetUIDs maps the source UID of a moved object to its UID in the target.
	targetUIDs map[types.UID]types.UID
	// namespaces holds the target namespaces known to exist.
	namespaces map[string]bool
	// planCounts counts the plan's objects per kind and namespace.
	planCounts map[kindNamespace]int
	// targetID identifies the target cluster, to recognise earlier copies.
	targetID types.UID
	// copies are the target UIDs of the copies this operation made and
	// recorded before it restored their managed fields (see CopyGroup).
	copies map[types.UID]bool
	// recordCopies, when set, records the copies of a group (see OnCopied).
	recordCopies func(ctx context.Context, group int, uids []types.UID) error
	// recorded are the copies of group recordedGroup recorded by this
	// Copier: a group copied again after an error finds those it already
	// finished among them.
	recorded      map[types.UID]bool
	recordedGroup int
	// carry, when set, says which kinds' copies get their source's status
	// (CarryStatus).
	carry func(schema.GroupKind) bool
	// waiting are the copies whose status names, by UID, a moved object not
	// copied yet: they are finished once it is (see finishWaiting), by
	// target UID.
	waiting map[types.UID]copied
}

// NewCopier returns a Copier of the plan's objects from source to target for
// the operation with the given UID. Its writes in the target are the
// operation's field manager's (FieldOwner).
func NewCopier(source, target client.Client, plan *graph.Plan, operation string, opts Options) *Copier {
	return &Copier{
		source: source, target: client.WithFieldOwner(target, FieldOwner(operation)), plan: plan, operation: operation, opts: opts,
		targetUIDs: map[types.UID]types.UID{},
		namespaces: map[string]bool{},
		waiting:    map[types.UID]copied{},
	}
}

// WithCopies gives the Copier the copies recorded by an earlier run of the
// same operation (target UIDs), so that it knows them as its own once their
// managed fields are the source's.
func (c *Copier) WithCopies(uids map[types.UID]bool) *Copier {
	c.copies = uids
	return c
}

// OnCopied sets what records the copies of a group (their target UIDs) for
// a later run or a rollback: it is called before their managed fields are
// restored, which takes away the operation's own entry, the last mark of
// the copy on it, once per batch of a group (Options.CopyBatch) with the
// copies not recorded yet. What it records must add to what it recorded
// before, never replace it: each call names other copies.
func (c *Copier) OnCopied(record func(ctx context.Context, group int, uids []types.UID) error) *Copier {
	c.recordCopies = record
	return c
}

// CopyResult counts what a CopyGroup did.
type CopyResult struct {
	// Created is how many objects were created in the target.
	Created int
	// Existing is how many were there already: created by this operation
	// before a crash, or global objects present in the target beforehand.
	Existing int
}

// CopyGroup creates every object of one group in the target, with at most
// Options.Concurrency requests in flight. Each object is read from the
// source at its storage version, stripped of what the target assigns itself
// (uid, resourceVersion, creationTimestamp, generation, managedFields),
// created by the operation's field manager, and its owner references are pointed at the
// owners' UIDs in the target; references to owners that do not move are
// dropped, as the plan warned. Objects of an ownership cycle (the same
// group) get those references once the whole group exists. Last, each copy
// gets the source's managed fields, every manager's entry, pointed at the
// same owners (restoreManagedFields), once it is recorded (OnCopied). The
// group is copied in batches of Options.CopyBatch objects, each recorded
// and given its managed fields before the next is copied, so that the copy
// holds a batch's managed fields, never a group's.
//
// Objects found in the target when the plan was recorded (FoundInTarget)
// are used as found. An object that already exists in the target otherwise
// is progress when it is this operation's copy (isOurs: a restarted
// operator creates every group again), and a *ConflictError when it is not,
// except for global objects and their hierarchies, which are used as found
// (clusterctl does the same: a target may already have the provider's
// identities), and for the unchanged copy an earlier move made.
func (c *Copier) CopyGroup(ctx context.Context, group int) (CopyResult, error) {
	if group < 0 || group >= len(c.plan.Groups) {
		return CopyResult{}, fmt.Errorf("copying group %d: the plan has %d groups", group+1, len(c.plan.Groups))
	}
	objects := c.plan.Groups[group]
	logger := log.FromContext(ctx).WithValues("group", group+1, "objects", len(objects))
	logger.V(1).Info("copying group to the target")

	if err := c.ensureNamespaces(ctx, objects); err != nil {
		return CopyResult{}, err
	}
	c.beginGroup(group)

	var (
		mu     sync.Mutex
		result CopyResult
		// inCycle are the copies whose owners are in their own group
		// (ownership cycles): they are finished once the whole group exists.
		inCycle []copied
	)
	items, stop := iter.Pull(c.sources(ctx, objects))
	defer stop()
	for more := true; more; {
		// One batch: its copies are made, then recorded and given their
		// managed fields, before the next batch is read, so that memory
		// holds the source managed fields of a batch, not of the group.
		var batch []copied
		err := forEachSeq(ctx, take(items, c.opts.copyBatch(), &more), c.opts.concurrency(), func(ctx context.Context, item sourceItem) error {
			created, copy, err := c.copyObject(ctx, item.object, item.source)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if created {
				result.Created++
			} else {
				result.Existing++
			}
			switch {
			case copy == nil:
			case len(copy.linkRefs) > 0:
				inCycle = append(inCycle, *copy)
			case copy.waitsFor >= 0:
				c.wait(*copy)
			default:
				batch = append(batch, *copy)
			}
			return nil
		})
		if err != nil {
			return result, fmt.Errorf("copying group %d to the target: %w", group+1, err)
		}
		if err := c.finish(ctx, group, batch); err != nil {
			return result, err
		}
	}

	// Every member of the group exists now: link the owners that are in
	// the group too (ownership cycles), then finish those copies.
	err := forEach(ctx, inCycle, c.opts.concurrency(), c.linkOwners)
	if err != nil {
		return result, fmt.Errorf("linking the owners of group %d in the target: %w", group+1, err)
	}
	var linked []copied
	for _, d := range inCycle {
		if d.waitsFor >= 0 {
			c.wait(d)
			continue
		}
		linked = append(linked, d)
	}
	if err := c.finish(ctx, group, linked); err != nil {
		return result, err
	}
	if err := c.finishWaiting(ctx, group); err != nil {
		return result, err
	}
	logger.V(1).Info("copied group to the target", "created", result.Created, "existing", result.Existing)
	return result, nil
}

// take yields at most n items from next, and sets *more to false once next
// has no more.
func take[T any](next func() (T, bool), n int, more *bool) iter.Seq[T] {
	return func(yield func(T) bool) {
		for range n {
			item, ok := next()
			if !ok {
				*more = false
				return
			}
			if !yield(item) {
				return
			}
		}
	}
}

// finish makes the last writes of copies whose owners all exist, and the
// moved objects their status names: it records them (OnCopied), then
// writes each one's status when it has one to get (copyStatus), and last
// gives each the source's managed fields, which takes away the operation's
// own entry, the last mark of the copy on it.
func (c *Copier) finish(ctx context.Context, group int, copies []copied) error {
	if len(copies) == 0 {
		return nil
	}
	if c.recordCopies != nil {
		var uids []types.UID
		c.mu.Lock()
		for _, d := range copies {
			if !c.copies[d.targetUID] && !c.recorded[d.targetUID] {
				uids = append(uids, d.targetUID)
			}
		}
		c.mu.Unlock()
		if len(uids) > 0 {
			if err := c.recordCopies(ctx, group, uids); err != nil {
				return fmt.Errorf("recording the copies of group %d: %w", group+1, err)
			}
		}
		c.mu.Lock()
		for _, u := range uids {
			c.recorded[u] = true
		}
		c.mu.Unlock()
	}
	err := forEach(ctx, copies, c.opts.concurrency(), func(ctx context.Context, d copied) error {
		if d.status != nil {
			if err := c.copyStatus(ctx, d.object, d.targetUID, d.status); err != nil {
				return err
			}
		}
		return c.restoreManagedFields(ctx, d.object, d.targetUID, d.owners, d.managedFields)
	})
	if err != nil {
		return fmt.Errorf("finishing the copies of group %d in the target: %w", group+1, err)
	}
	return nil
}

// beginGroup forgets the copies recorded for another group: a group is
// copied again only until it succeeds, so only its own are needed to
// know, when it is, which of the copies with the source's managed fields
// are this operation's.
func (c *Copier) beginGroup(group int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recorded == nil || c.recordedGroup != group {
		c.recorded, c.recordedGroup = map[types.UID]bool{}, group
	}
}

// isOurs reports whether an object found in the target is this operation's
// copy: it still carries the operation's field manager, or it was recorded
// as a copy, by an earlier run or by this one for the group it copies.
func (c *Copier) isOurs(existing metav1.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return isOurCopy(existing, c.operation, c.copies) || c.recorded[existing.GetUID()]
}

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

// sourceItem is an object to copy, with its source copy when a list
// already read it (nil when it is to be read on its own).
type sourceItem struct {
	object *graph.Object
	source *unstructured.Unstructured
}

// listThreshold decides how the objects of a group are read from the
// source. Objects of one kind and namespace are listed, page by page, when
// the group holds at least listMinimum of them and at least a tenth of the
// plan's objects of that kind and namespace: one LIST then replaces many
// GETs while transferring at most ten times what is copied. The others are
// read one by one.
//
// Why a tenth: a kind spreads over several groups (a fleet's Secrets sit
// at five depths, its Machines at two or three), so each group holds only a
// part of it. With a third, as before, most of a fleet's Secrets, Machines
// and bootstrap configs were read one by one: 0.6 GET per moved object in
// `make bench`. A GET costs the API server a request's overhead, several
// times the cost of one more object in a page, so reading a few times what
// is copied is still the cheaper way, and it keeps to a page in memory.
const (
	listMinimum  = 4
	listFraction = 10
)

// fullPageSize is the limit of the copy's LIST requests, which read whole
// objects. A page is the largest thing the copy holds: decoded, a page of
// 500 Cluster API objects took 17 MiB, more than half the operator's live
// heap at its peak in `make bench`. A page of 100 takes a fifth
// of that, for one more LIST request per 100 objects listed, against the
// one or two writes each copied object costs.
const fullPageSize = 100

type kindNamespace struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// sources yields the objects of a group with their source copies, reading
// them as the copy consumes them, so that memory holds a page and the
// objects in flight, never a whole group.
func (c *Copier) sources(ctx context.Context, objects []*graph.Object) iter.Seq[sourceItem] {
	return func(yield func(sourceItem) bool) {
		c.mu.Lock()
		if c.planCounts == nil {
			c.planCounts = map[kindNamespace]int{}
			for _, o := range c.plan.Objects() {
				c.planCounts[kindNamespace{o.GVK, o.Namespace}]++
			}
		}
		planCounts := c.planCounts
		c.mu.Unlock()

		inGroup := map[kindNamespace]map[types.UID]*graph.Object{}
		var pairs []kindNamespace
		for _, o := range objects {
			k := kindNamespace{o.GVK, o.Namespace}
			if inGroup[k] == nil {
				inGroup[k] = map[types.UID]*graph.Object{}
				pairs = append(pairs, k)
			}
			inGroup[k][o.UID] = o
		}

		for _, k := range pairs {
			members := inGroup[k]
			if len(members) < listMinimum || len(members)*listFraction < planCounts[k] {
				continue
			}
			stopped := false
			err := listFull(ctx, c.source, k.gvk, k.namespace, func(u *unstructured.Unstructured) bool {
				o, ok := members[u.GetUID()]
				if !ok {
					return true
				}
				delete(members, u.GetUID())
				if !yield(sourceItem{object: o, source: u}) {
					stopped = true
				}
				return !stopped
			})
			if stopped {
				return
			}
			if err != nil {
				// Read whatever the list did not deliver one by one; a
				// source that is really unreachable fails there, per object.
				log.FromContext(ctx).V(1).Info("listing the source failed, reading objects one by one",
					"kind", graph.KindString(k.gvk.GroupKind()), "namespace", k.namespace, "error", err.Error())
			}
		}
		// Objects not listed, or that a list did not return (their GET
		// reports why), in the group's order.
		for _, o := range objects {
			if _, pending := inGroup[kindNamespace{o.GVK, o.Namespace}][o.UID]; pending {
				if !yield(sourceItem{object: o}) {
					return
				}
			}
		}
	}
}

// listFull lists the objects of a kind in a namespace ("" for all, or for a
// cluster-scoped kind) in full, page by page, and calls each for every
// object until it returns false.
//
// It reads the next page only when each has taken the last one, not through
// listing.Each: the pager reads a page ahead while one is handled, and each
// here hands objects to the copy, which can hold a page for as long as it
// takes to copy it, so memory would hold two pages of full objects instead
// of one. An expired continue token ends the list with an error; sources
// then reads one by one what the list did not deliver.
func listFull(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string, each func(*unstructured.Unstructured) bool) error {
	token := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.Limit(fullPageSize), client.Continue(token)}
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := retryTransient(ctx, func() error { return c.List(ctx, list, opts...) }); err != nil {
			return err
		}
		for i := range list.Items {
			item := &list.Items[i]
			item.SetGroupVersionKind(gvk)
			if !each(item) {
				return nil
			}
		}
		token = list.GetContinue()
		if token == "" {
			return nil
		}
	}
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
		c.recordUID(o.UID, uid)
		return false, nil, nil
	}
	obj, managedFields := prepare(src, owners.targetUIDs)

	created, targetGeneration, asFound, err := c.createInTarget(ctx, o, obj, prov, hasProv && srcContent == prov.Content)
	if err != nil || asFound {
		return false, nil, err
	}
	c.recordUID(o.UID, obj.GetUID())

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
}

// ownersOf sorts src's owner references. An owner that does not move is
// left out: the plan reported it, and it does not exist in the target.
func (c *Copier) ownersOf(ctx context.Context, o *graph.Object, src *unstructured.Unstructured) (copyOwners, error) {
	owners := copyOwners{targetUIDs: map[types.UID]types.UID{}, moving: map[types.UID]bool{}}
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
			uid, err := c.targetUID(ctx, owner)
			if err != nil {
				return copyOwners{}, fmt.Errorf("copying %s: %w", o.ObjectRef, err)
			}
			owners.targetUIDs[ref.UID] = uid
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
	existing.SetGroupVersionKind(o.GVK)
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
		c.recordUID(o.UID, existing.GetUID())
		return false, 0, true, nil
	}
	if !ours {
		// Used as found: neither its managed fields nor its owners are ours to change.
		c.recordUID(o.UID, existing.GetUID())
		return false, 0, true, nil
	}
	obj.SetUID(existing.GetUID())
	obj.SetResourceVersion(existing.GetResourceVersion())
	return false, existing.GetGeneration(), false, nil
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
			uid, err := c.targetUID(ctx, owner)
			if err != nil {
				return fmt.Errorf("linking the owners of %s: %w", d.object.ObjectRef, err)
			}
			ref.UID = uid
		}
		refs = append(refs, ref)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": d.targetUID, "ownerReferences": refs}})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(d.object.GVK)
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
// dropped.
func (c *Copier) restoreManagedFields(ctx context.Context, o *graph.Object, uid types.UID, owners map[types.UID]bool, source []metav1.ManagedFieldsEntry) error {
	if len(source) == 0 {
		return nil
	}
	fields, err := rewriteOwnerUIDs(source, func(sourceUID types.UID) (types.UID, bool, error) {
		owner, moves := c.plan.Object(sourceUID)
		if !moves || !owners[sourceUID] {
			return "", false, nil
		}
		targetUID, err := c.targetUID(ctx, owner)
		return targetUID, err == nil, err
	})
	if err != nil {
		return fmt.Errorf("restoring the managed fields of %s in the target: %w", o.ObjectRef, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "managedFields": fields}})
	if err != nil {
		return err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(o.GVK)
	target.SetNamespace(o.Namespace)
	target.SetName(o.Name)
	if err := retryTransient(ctx, func() error { return c.target.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)) }); err != nil {
		return fmt.Errorf("restoring the managed fields of %s in the target: %w", o.ObjectRef, err)
	}
	return nil
}

// isEarlierCopy reports whether the object found in the target is the copy
// an earlier move made of o, as o's provenance records, unchanged since; the
// source side was checked by the caller (sourceUnchanged).
func (c *Copier) isEarlierCopy(ctx context.Context, o *graph.Object, prov Provenance, sourceUnchanged bool, existing types.UID) (bool, error) {
	if !sourceUnchanged || c.targetID == "" || prov.Target != c.targetID || prov.Copy != existing {
		return false, nil
	}
	copied, err := getUnstructured(ctx, c.target, o.ObjectRef)
	if err != nil {
		return false, fmt.Errorf("reading %s, which an earlier move copied to the target: %w", o.ObjectRef, err)
	}
	return copied.GetUID() == existing && ContentHash(copied) == prov.Content, nil
}

// RecognizeCopiesIn lets the Copier take as already made the copies that
// earlier moves made in the target with this ID, when unchanged since.
func (c *Copier) RecognizeCopiesIn(targetID types.UID) *Copier {
	c.targetID = targetID
	return c
}

func (c *Copier) recordUID(source, target types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targetUIDs[source] = target
}

// targetUID returns the UID in the target of a moved owner: from memory when
// this Copier created or found it, otherwise by reading it by name (a
// Copier built after a crash, or an owner of an earlier run). The owner must
// be this operation's copy, or a global object used as found.
func (c *Copier) targetUID(ctx context.Context, owner *graph.Object) (types.UID, error) {
	c.mu.Lock()
	uid, ok := c.targetUIDs[owner.UID]
	c.mu.Unlock()
	if ok {
		return uid, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(owner.GVK)
	if err := retryTransient(ctx, func() error { return c.target.Get(ctx, owner.Key(), obj) }); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("its owner %s is not in the target yet (copy the groups in order)", owner.ObjectRef)
		}
		return "", fmt.Errorf("reading its owner %s in the target: %w", owner.ObjectRef, err)
	}
	if !owner.Global && !owner.InGlobalHierarchy && !owner.FoundInTarget && !isOurCopy(obj, c.operation, c.copies) {
		return "", &ConflictError{Object: owner.ObjectRef}
	}
	c.recordUID(owner.UID, obj.GetUID())
	return obj.GetUID(), nil
}

// foundUID reads the UID of an object the target had when the plan was
// recorded.
func (c *Copier) foundUID(ctx context.Context, o *graph.Object) (types.UID, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(o.GVK)
	if err := retryTransient(ctx, func() error { return c.target.Get(ctx, o.Key(), obj) }); err != nil {
		return "", fmt.Errorf("reading %s, which the target had when the move began: %w", o.ObjectRef, err)
	}
	return obj.GetUID(), nil
}

// ensureNamespaces creates the namespaces of a group's objects that the
// target lacks, by the operation's field manager, so that a rollback knows
// them as its own.
func (c *Copier) ensureNamespaces(ctx context.Context, objects []*graph.Object) error {
	for _, o := range objects {
		if o.Namespace == "" {
			continue
		}
		c.mu.Lock()
		known := c.namespaces[o.Namespace]
		c.mu.Unlock()
		if known {
			continue
		}
		if err := EnsureNamespace(ctx, c.target, o.Namespace); err != nil {
			return err
		}
		c.mu.Lock()
		c.namespaces[o.Namespace] = true
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

// prepare returns the object to create in the target from its source copy:
// the same content without the fields the target assigns itself, with
// owner references to moved owners pointed at
// their target UIDs (ownerUIDs, by source UID) and the others dropped
// (owners of the same group are linked after the create). It also returns
// the source's managed fields, every entry, for restoreManagedFields. The
// source object is reused, not copied: the caller must not use it
// afterwards.
func prepare(src *unstructured.Unstructured, ownerUIDs map[types.UID]types.UID) (*unstructured.Unstructured, []metav1.ManagedFieldsEntry) {
	managedFields := src.GetManagedFields()

	var refs []metav1.OwnerReference
	for _, ref := range src.GetOwnerReferences() {
		if uid, ok := ownerUIDs[ref.UID]; ok {
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
