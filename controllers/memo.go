package controllers

import (
	"context"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/backup"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/identity"
	"github.com/move-operator/move-operator/internal/look"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/remote"
)

// memo is what the reconciler keeps in memory between reconciles of one
// MoveOperation, to avoid reading every object again for every group. All
// of it can be rebuilt from the clusters: a restarted operator starts with
// an empty memo and reaches the same result.
type memo struct {
	// finished records, by phase and name, the sub-steps done once per
	// operator run (subStep.once) that finished, and a few milestones
	// within one (the target's controllers scaled up in RestoringTarget,
	// the moved objects checked with its webhooks, the source's identity
	// followed): see memo.finish. Each of them is idempotent, so a
	// restarted operator, which starts with none recorded, does them again
	// and reaches the same result. A phase is entered once per move, so
	// the records of a phase left behind are never read again.
	finished map[string]bool

	// pausePlan is the plan ScalingDown paused and waits on for
	// block-move, dropped once no object of it carries block-move.
	pausePlan *graph.Plan

	// copyPlan is the recorded plan (see internal/planrecord) Copying
	// creates in the target, group by group; nextCopy is the next group to
	// create.
	copyPlan *graph.Plan
	copier   *move.Copier
	nextCopy int
	// copyTarget is the target client the copier writes through.
	// followTarget points it at the client of the kubeconfig the target
	// Secret holds now (copyTargetOf), so that a rotated credential is
	// used at the next group, without copying again the groups done;
	// copyTargetID is the target cluster the copier's UIDs belong to.
	copyTarget   *retargetable
	copyTargetOf *remote.Target
	copyTargetID types.UID
	// copyStarted is when this run began Copying (counted in
	// status.progress.copyStarts); lastCopied when it last copied a group;
	// copiedBefore how many groups were copied when it began, or since.
	copyStarted, lastCopied time.Time
	copiedBefore            int

	// restoring is a restore's archive, read once, and the restore of it
	// into this cluster (see restoreOf).
	restoring *backup.Restore

	// archived is what a backup's Copying stored, until the status
	// records it (see writeArchive).
	archived *archived

	// deletePlan is the recorded plan Deleting removes from the source, last
	// group first; nextDelete is the next group to delete.
	deletePlan *graph.Plan
	nextDelete int
	// deletedBefore and deletedGroupsBefore are what the status counted
	// when deletePlan was built; deleted and deletedGroups what this run
	// deleted since.
	deletedBefore, deletedGroupsBefore int32
	deleted, deletedGroups             int32

	// followedTarget is the target client for which the bypass in the
	// target was last made to name the operator's identity there (see
	// followIdentities): a client of another kubeconfig may authenticate
	// as somebody else.
	followedTarget *remote.Target

	// perClient is what the run learnt of each cluster, per client of it:
	// who the operator is there (whoAmI), the managers of its providers
	// (managersSeen).
	perClient perClient

	// waiting names the wait this run is in (its phase and step), and
	// waitingSince when it began: a wait looks again soon at first, then
	// less often (see poll).
	waiting      string
	waitingSince time.Time
}

// retargetable is a client whose calls go to the client it holds when they
// are made. The copier keeps one for the whole of Copying, and the run
// points it at a new target client between reconciles, never during one:
// the reconciles of one MoveOperation do not overlap.
type retargetable struct{ client.Client }

// reset forgets everything: the plan changed.
func (r *memo) reset() {
	r.close()
	*r = memo{}
}

// close releases what the memo holds open: a restore's archive (a file,
// a registry's archive spooled to disk). A memo is dropped when its
// MoveOperation ends or is gone, also when it failed before Copying,
// where nothing else would close it.
func (r *memo) close() {
	if r.restoring != nil {
		_ = r.restoring.Archive.Close() // read only; nothing to lose
		r.restoring = nil
	}
}

// memoOf returns the memo of a MoveOperation, creating it when absent.
func (r *MoveOperationReconciler) memoOf(uid types.UID) *memo {
	v, _ := r.memos.LoadOrStore(uid, &memo{})
	return v.(*memo)
}

// forgetMemo drops the memo of a MoveOperation that ended or is gone,
// closing what it holds open.
func (r *MoveOperationReconciler) forgetMemo(uid types.UID) {
	if v, ok := r.memos.LoadAndDelete(uid); ok {
		v.(*memo).close()
	}
}

// perClient keeps what a run learnt of a cluster, per client of it: a
// client of another kubeconfig (a rotated target Secret) may be another
// identity, or even another cluster, and learns it again. Clients of a
// type that cannot key a map (a test's wrapper) keep nothing.
type perClient struct {
	mu         sync.Mutex
	identities map[client.Client]identity.Identity
	managers   map[client.Client][]types.NamespacedName
}

func keyable(c client.Client) bool { return c != nil && reflect.TypeOf(c).Comparable() }

// keyOf is the client a look reads through (see look.Through).
func keyOf(c client.Client) client.Client { return look.Through(c) }

func (p *perClient) identityOf(c client.Client) (identity.Identity, bool) {
	c = keyOf(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !keyable(c) {
		return identity.Identity{}, false
	}
	who, ok := p.identities[c]
	return who, ok
}

func (p *perClient) keepIdentity(c client.Client, who identity.Identity) {
	c = keyOf(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !keyable(c) {
		return
	}
	if p.identities == nil {
		p.identities = map[client.Client]identity.Identity{}
	}
	p.identities[c] = who
}

func (p *perClient) managersOf(c client.Client) ([]types.NamespacedName, bool) {
	c = keyOf(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !keyable(c) {
		return nil, false
	}
	keys, ok := p.managers[c]
	return keys, ok
}

func (p *perClient) keepManagers(c client.Client, keys []types.NamespacedName) {
	c = keyOf(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !keyable(c) {
		return
	}
	if p.managers == nil {
		p.managers = map[client.Client][]types.NamespacedName{}
	}
	p.managers[c] = keys
}

// whoAmI asks a cluster who the operator is there (identity.WhoAmI), once
// per client and run of a move: a client holds one credential for as long
// as it lives, so the API server's answer does not change (a new
// kubeconfig in the target Secret gives a new client, asked again; the
// source's client is the operator's own for as long as it runs). The
// bypass, the check of a shared identity and following a rotated
// credential each asked it again: a request each.
func (r *MoveOperationReconciler) whoAmI(ctx context.Context, s *scope, c client.Client) (identity.Identity, error) {
	ids := &r.memoOf(s.mo.UID).perClient
	if who, ok := ids.identityOf(c); ok {
		return who, nil
	}
	who, err := identity.WhoAmI(ctx, c)
	if err != nil {
		return identity.Identity{}, err
	}
	ids.keepIdentity(c, who)
	return who, nil
}
