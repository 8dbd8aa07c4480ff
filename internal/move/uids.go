package move

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// targetUIDs maps the source UID of each moved object to the UID of its
// copy in the target, for the owner references, the managed fields and
// the statuses that name it. It is the bottom of a Copier: the copy of an
// object (copyobject.go), of its status (status.go) and of a group
// (copy.go) ask it, and it asks none of them. It is safe for concurrent
// use.
type targetUIDs struct {
	target    client.Client
	operation string
	// plan says at which version the target stores each kind.
	plan *graph.Plan
	// copies are the target UIDs of the copies this operation made and
	// recorded before it restored their managed fields (see
	// Copier.WithCopies); set before the copy begins, never changed.
	copies map[types.UID]bool

	mu       sync.Mutex
	bySource map[types.UID]types.UID
}

func newTargetUIDs(target client.Client, operation string, plan *graph.Plan) *targetUIDs {
	return &targetUIDs{target: target, operation: operation, plan: plan, bySource: map[types.UID]types.UID{}}
}

// record notes the target UID of a moved object, created or found.
func (u *targetUIDs) record(source, target types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.bySource[source] = target
}

// known reports whether the target UID of a moved object is noted: its
// copy exists.
func (u *targetUIDs) known(source types.UID) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.bySource[source]
	return ok
}

// of returns the UID in the target of a moved owner: from memory when
// this Copier created or found it, otherwise by reading it by name (a
// Copier built after a crash, or an owner of an earlier run). The owner must
// be this operation's copy, or a global object used as found.
func (u *targetUIDs) of(ctx context.Context, owner *graph.Object) (types.UID, error) {
	u.mu.Lock()
	uid, ok := u.bySource[owner.UID]
	u.mu.Unlock()
	if ok {
		return uid, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(u.plan.TargetGVK(owner.GVK))
	if err := retryTransient(ctx, func() error { return u.target.Get(ctx, owner.Key(), obj) }); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("its owner %s is not in the target yet (copy the groups in order)", owner.ObjectRef)
		}
		return "", fmt.Errorf("reading its owner %s in the target: %w", owner.ObjectRef, err)
	}
	if !owner.Global && !owner.InGlobalHierarchy && !owner.FoundInTarget && !IsCopyOf(obj, u.operation, u.copies) {
		return "", &ConflictError{Object: owner.ObjectRef}
	}
	u.record(owner.UID, obj.GetUID())
	return obj.GetUID(), nil
}
