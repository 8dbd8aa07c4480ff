package move

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/move-operator/move-operator/internal/graph"
)

// DefaultConcurrency is how many requests an operation keeps in flight when
// Options.Concurrency is zero. Measured on two cores, the source API server
// saturates at about four requests in flight; eight keeps it busy while
// some requests wait on admission webhooks.
const DefaultConcurrency = 8

// maxGroupErrors is how many objects of one group may fail before an
// operation stops starting new requests: when a cluster is unreachable,
// every object fails the same way, and trying the rest only delays the
// error.
const maxGroupErrors = 10

// Options tunes the operations that write many objects.
type Options struct {
	// Concurrency bounds the requests in flight to one cluster;
	// DefaultConcurrency when zero or negative.
	Concurrency int
	// CopyBatch is how many copies of a group are made before they are
	// recorded and given their managed fields; DefaultCopyBatch when zero
	// or negative.
	CopyBatch int
}

// DefaultCopyBatch is how many copies the copy finishes at once when
// Options.CopyBatch is zero. Until a copy is finished the copy holds its
// source managed fields (about 800 bytes for a Cluster API object): a
// thousand workload clusters put 18,000 objects in one group, whose fields
// took 14.5 MB of the operator's heap at its peak when a group was
// finished as a whole. Each batch costs one write of its
// record, and waits for its slowest copy before the next starts: with 500
// that is one write more per 500 objects, and a pause of one request's
// length.
const DefaultCopyBatch = 500

func (o Options) copyBatch() int {
	if o.CopyBatch <= 0 {
		return DefaultCopyBatch
	}
	return o.CopyBatch
}

func (o Options) concurrency() int {
	if o.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return o.Concurrency
}

// ConflictError reports an object that exists in the target and was not
// created by this operation: the move must not overwrite it.
type ConflictError struct {
	Object graph.ObjectRef
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s already exists in the target and was not created by this move", e.Object)
}

// VanishedError reports an object of the plan that is no longer in the
// source when the copy reads it: deleted, or deleted and created again under
// its name, by a writer the move does not stop. The moved set changed, and
// no retry brings the object back.
type VanishedError struct {
	Object graph.ObjectRef
	// ReplacedBy is the UID of the object now under its name, if one is.
	ReplacedBy types.UID
}

func (e *VanishedError) Error() string {
	if e.ReplacedBy != "" {
		return fmt.Sprintf("%s was replaced in the source while the move copied (UID %s, planned %s)", e.Object, e.ReplacedBy, e.Object.UID)
	}
	return fmt.Sprintf("%s vanished from the source while the move copied (deleted by a writer the move does not stop)", e.Object)
}

// GroupError gathers the failures of an operation over many objects.
type GroupError struct {
	// Errors are the failures, each naming its object.
	Errors []error
	// Skipped is how many objects were not tried once too many had failed.
	Skipped int
}

func (e *GroupError) Error() string {
	msg := fmt.Sprintf("%d objects failed", len(e.Errors))
	if e.Skipped > 0 {
		msg += fmt.Sprintf(" (%d more not tried)", e.Skipped)
	}
	for i, err := range e.Errors {
		if i == 5 {
			msg += fmt.Sprintf("; and %d more", len(e.Errors)-5)
			break
		}
		msg += "; " + err.Error()
	}
	return msg
}

// Unwrap lets errors.As find a ConflictError or a VanishedError among the
// failures.
func (e *GroupError) Unwrap() []error { return e.Errors }

// forEach runs fn for every item with at most concurrency calls at a time,
// and gathers the errors. It stops starting new calls once maxGroupErrors
// have failed or the context is done.
func forEach[T any](ctx context.Context, items []T, concurrency int, fn func(context.Context, T) error) error {
	return forEachSeq(ctx, slices.Values(items), concurrency, fn)
}

// forEachSeq is forEach over a sequence produced while the calls run, so
// that items can be read as they are needed rather than all held at once.
// The sequence is always consumed to its end; items after the stop are
// counted as skipped.
func forEachSeq[T any](ctx context.Context, items iter.Seq[T], concurrency int, fn func(context.Context, T) error) error {
	var (
		mu      sync.Mutex
		errs    []error
		skipped int
	)
	// The group bounds the calls in flight; it does not gather the errors,
	// since it keeps only the first, nor cancel on one, since the other
	// objects are worth trying until maxGroupErrors have failed.
	var g errgroup.Group
	g.SetLimit(concurrency)
	for item := range items {
		// Go takes a slot before the call starts, so the decision to go on
		// sees the result of every call that finished before it.
		g.Go(func() error {
			mu.Lock()
			stop := len(errs) >= maxGroupErrors || ctx.Err() != nil
			if stop {
				skipped++
			}
			mu.Unlock()
			if stop {
				return nil
			}
			if err := fn(ctx, item); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // every call returns nil; the errors are in errs
	if len(errs) == 0 && skipped == 0 {
		return nil
	}
	if len(errs) == 0 {
		return ctx.Err()
	}
	return &GroupError{Errors: errs, Skipped: skipped}
}

// transient reports whether a request may succeed if simply repeated: the
// API server was overloaded, timed out or was briefly unreachable.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err)
}

// transientBackoff is five tries, 100 ms apart doubling each time (about
// 1.5 s in all): enough to ride out a brief overload without hiding a
// cluster that is down from the caller, who has its own timeout.
var transientBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 2}

// retryTransient calls fn until it succeeds, fails with an error that is not
// transient, or has been tried as often as transientBackoff allows. It
// stops retrying once ctx is done, and then says so in the error.
func retryTransient(ctx context.Context, fn func() error) error {
	err := retry.OnError(transientBackoff, func(err error) bool { return transient(err) && ctx.Err() == nil }, fn)
	if err != nil && transient(err) && ctx.Err() != nil {
		return errors.Join(err, ctx.Err())
	}
	return err
}
