// Package claim gives one MoveOperation at a time the right to move a source
// cluster, atomically: a Lease in the operator's namespace names the holder,
// and every change to it is an optimistic-lock write, so of two operations
// that try at once exactly one wins, whatever the caches of their readers
// show.
//
// The claim has no expiry: a move holds it from Pending until it ends, even
// across operator restarts. A holder that has ended or no longer exists is
// stale, and its claim may be taken over; the caller says which holders are
// still active. It never reads or writes anything but its one Lease.
package claim

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultName is the name of the Lease that holds the claim.
const DefaultName = "move-operator-source-cluster"

// Annotations on the Lease naming the holder for people and for the check
// whether it is still active (the Lease's holderIdentity is its UID).
const (
	holderNamespaceAnnotation = "move.cluster.x-k8s.io/holder-namespace"
	holderNameAnnotation      = "move.cluster.x-k8s.io/holder-name"
)

// Holder is the MoveOperation holding or asking for the claim.
type Holder struct {
	Namespace, Name string
	UID             types.UID
}

func (h Holder) String() string { return h.Namespace + "/" + h.Name }

// Active reports whether a holder still moves (exists with that UID and has
// not ended); a claim whose holder is not active may be taken over.
type Active func(ctx context.Context, h Holder) (bool, error)

// Lock is the claim on one source cluster.
type Lock struct {
	Client client.Client
	// Key of the Lease; its namespace must exist.
	Key types.NamespacedName
}

// maxAttempts bounds the optimistic-lock retries of one Acquire: each lost
// race means somebody else wrote the Lease, and the next read shows who.
const maxAttempts = 5

// Acquire takes the claim for h, unless another active holder has it. It
// returns the holder after the attempt: h itself when h holds the claim.
func (l Lock) Acquire(ctx context.Context, h Holder, active Active) (Holder, error) {
	for range maxAttempts {
		holder, err := l.tryAcquire(ctx, h, active)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // lost a race: read again
		}
		return holder, err
	}
	return Holder{}, fmt.Errorf("claiming Lease %s for MoveOperation %s: it kept changing while being written; retrying", l.Key, h)
}

func (l Lock) tryAcquire(ctx context.Context, h Holder, active Active) (Holder, error) {
	lease := &coordinationv1.Lease{}
	err := l.Client.Get(ctx, l.Key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: l.Key.Namespace, Name: l.Key.Name}}
		setHolder(lease, h)
		if err := l.Client.Create(ctx, lease); err != nil {
			return Holder{}, wrapUnlessRace(err, "creating Lease %s", l.Key)
		}
		return h, nil
	}
	if err != nil {
		return Holder{}, fmt.Errorf("getting Lease %s: %w", l.Key, err)
	}
	current, held := holderOf(lease)
	if held && current.UID == h.UID {
		return h, nil
	}
	if held {
		ok, err := active(ctx, current)
		if err != nil {
			return Holder{}, fmt.Errorf("checking whether MoveOperation %s, which holds Lease %s, still moves: %w", current, l.Key, err)
		}
		if ok {
			return current, nil
		}
	}
	// Free, or held by an operation that has ended: take it, on condition
	// that nobody wrote the Lease since it was read.
	setHolder(lease, h)
	if err := l.Client.Update(ctx, lease); err != nil {
		return Holder{}, wrapUnlessRace(err, "taking over Lease %s", l.Key)
	}
	return h, nil
}

// Release gives the claim up if h holds it. Releasing a claim that h does
// not hold, or that is gone, does nothing.
func (l Lock) Release(ctx context.Context, h Holder) error {
	lease := &coordinationv1.Lease{}
	if err := l.Client.Get(ctx, l.Key, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("getting Lease %s: %w", l.Key, err)
	}
	if current, held := holderOf(lease); !held || current.UID != h.UID {
		return nil
	}
	// Delete only the Lease as read: if another operation took it over
	// meanwhile, its claim stays.
	err := l.Client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing Lease %s held by MoveOperation %s: %w", l.Key, h, err)
	}
	return nil
}

func holderOf(lease *coordinationv1.Lease) (Holder, bool) {
	uid := ptr.Deref(lease.Spec.HolderIdentity, "")
	if uid == "" {
		return Holder{}, false
	}
	return Holder{
		Namespace: lease.Annotations[holderNamespaceAnnotation],
		Name:      lease.Annotations[holderNameAnnotation],
		UID:       types.UID(uid),
	}, true
}

func setHolder(lease *coordinationv1.Lease, h Holder) {
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[holderNamespaceAnnotation] = h.Namespace
	lease.Annotations[holderNameAnnotation] = h.Name
	lease.Spec.HolderIdentity = ptr.To(string(h.UID))
	now := metav1.NowMicro()
	lease.Spec.AcquireTime = &now
}

// wrapUnlessRace keeps a lost race recognisable to Acquire's retry.
func wrapUnlessRace(err error, format string, args ...any) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
