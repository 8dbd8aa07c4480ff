package move

import (
	"context"
	"fmt"
	"iter"
	"sync"

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
//
// Its files call one way: this one copies a group and finishes its copies,
// with the copy of one object (copyobject.go), the reading of the source
// (sources.go) and the copy of a status (status.go); all of them know the
// copies' UIDs through targetUIDs (uids.go), which calls none of them, and
// name a copy's kind at the version the target stores it at, converting
// the object when the source stores another (versions.go).
type Copier struct {
	// source is only read: a cluster, or an archive a restore reads.
	source    client.Reader
	target    client.Client
	plan      *graph.Plan
	operation string
	opts      Options
	// uids maps the source UID of a moved object to its UID in the
	// target, and knows this operation's recorded copies.
	uids *targetUIDs

	mu sync.Mutex
	// namespaces holds the target namespaces known to exist.
	namespaces map[string]bool
	// planCounts counts the plan's objects per kind and namespace.
	planCounts map[KindNamespace]int
	// targetID identifies the target cluster, to recognise earlier copies.
	targetID types.UID
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
	// targetKinds, when set, are the target's kinds (graph.DiscoverTypes),
	// whose versions the references of objects converted back name (see
	// ReferencesIn).
	targetKinds *graph.Types
}

// NewCopier returns a Copier of the plan's objects from source to target for
// the operation with the given UID. Its writes in the target are the
// operation's field manager's (FieldOwner).
func NewCopier(source client.Reader, target client.Client, plan *graph.Plan, operation string, opts Options) *Copier {
	target = client.WithFieldOwner(target, FieldOwner(operation))
	return &Copier{
		source: source, target: target, plan: plan, operation: operation, opts: opts,
		uids:       newTargetUIDs(target, operation, plan),
		namespaces: map[string]bool{},
		waiting:    map[types.UID]copied{},
	}
}

// WithCopies gives the Copier the copies recorded by an earlier run of the
// same operation (target UIDs), so that it knows them as its own once their
// managed fields are the source's.
func (c *Copier) WithCopies(uids map[types.UID]bool) *Copier {
	c.uids.copies = uids
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

// RecognizeCopiesIn lets the Copier take as already made the copies that
// earlier moves made in the target with this ID, when unchanged since.
func (c *Copier) RecognizeCopiesIn(targetID types.UID) *Copier {
	c.targetID = targetID
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
// source at its storage version, converted to the target's when the target
// stores its kind at another (versions.go), stripped of what the target assigns itself
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

	if err := c.ensureNamespaces(ctx, group, objects); err != nil {
		return CopyResult{}, err
	}
	c.beginGroup(group)
	result, inCycle, err := c.copyBatches(ctx, group, objects)
	if err != nil {
		return result, err
	}
	if err := c.finishGroup(ctx, group, inCycle); err != nil {
		return result, err
	}
	logger.V(1).Info("copied group to the target", "created", result.Created, "existing", result.Existing)
	return result, nil
}

// copyBatches creates the objects of a group, batch by batch: each
// batch's copies are made, then recorded and given their managed fields
// (finish) before the next batch is read, so that memory holds the source
// managed fields of a batch, not of the group. It returns the copies whose
// owners are in their own group (ownership cycles), to finish once the
// whole group exists.
func (c *Copier) copyBatches(ctx context.Context, group int, objects []*graph.Object) (CopyResult, []copied, error) {
	var (
		mu      sync.Mutex
		result  CopyResult
		inCycle []copied
	)
	items, stop := iter.Pull(c.sources(ctx, objects))
	defer stop()
	for more := true; more; {
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
			return result, nil, fmt.Errorf("copying group %d to the target: %w", group+1, err)
		}
		if err := c.finish(ctx, group, batch); err != nil {
			return result, nil, err
		}
	}
	return result, inCycle, nil
}

// finishGroup links the owners that are in the group too (ownership
// cycles), now that every member of the group exists, then finishes those
// copies, and those that waited for this group.
func (c *Copier) finishGroup(ctx context.Context, group int, inCycle []copied) error {
	err := forEach(ctx, inCycle, c.opts.concurrency(), c.linkOwners)
	if err != nil {
		return fmt.Errorf("linking the owners of group %d in the target: %w", group+1, err)
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
		return err
	}
	return c.finishWaiting(ctx, group)
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
			if !c.uids.copies[d.targetUID] && !c.recorded[d.targetUID] {
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

// wait keeps a copy until the objects its status names are copied.
func (c *Copier) wait(d copied) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting[d.targetUID] = d
}

// finishWaiting finishes the copies that waited for group: every moved
// object their status names has a copy now. They are recorded with that
// group. A restarted move copies every group again: a copy that was
// waiting, still marked by the operation's field manager, waits again.
func (c *Copier) finishWaiting(ctx context.Context, group int) error {
	var ready []copied
	c.mu.Lock()
	for uid, w := range c.waiting {
		if w.waitsFor <= group {
			ready = append(ready, w)
			delete(c.waiting, uid)
		}
	}
	c.mu.Unlock()
	if err := c.finish(ctx, group, ready); err != nil {
		// Kept for the group's next attempt.
		for _, d := range ready {
			c.wait(d)
		}
		return err
	}
	return nil
}
