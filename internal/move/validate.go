package move

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// Refusal is a moved object that the target's admission refused.
type Refusal struct {
	Object graph.ObjectRef
	// Message is the API server's answer.
	Message string
}

func (r Refusal) String() string { return fmt.Sprintf("%s: %s", r.Object, r.Message) }

// JoinRefusals names refusals for a message, the first ten of them.
func JoinRefusals(refusals []Refusal) string { return graph.JoinFirstTen(refusals, "; ") }

// ValidateInTarget sends each object, as it is in the target, through the
// target's admission again: an update with dryRun=All, which runs every
// mutating and validating webhook and admission policy and writes nothing.
// While the move copied, the stopped providers' webhooks were skipped for
// the operator; once they run again this is the check the copies did not
// get. It returns the refusals (an object a webhook or policy rejects, or
// finds invalid), sorted; any other error (the target unreachable) is
// returned as an error. An object gone since is not checked. Each is read
// and sent at the version the target stores its kind at (plan.TargetGVK).
func ValidateInTarget(ctx context.Context, target client.Client, plan *graph.Plan, objects []*graph.Object, opts Options) ([]Refusal, error) {
	var mu sync.Mutex
	var refusals []Refusal
	err := forEach(ctx, objects, opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
		// A controller of the target may write the object between the
		// read and the dry run: read it again, up to three times in all.
		err := retry.RetryOnConflict(wait.Backoff{Steps: 3}, func() error {
			return retryTransient(ctx, func() error {
				obj, err := getUnstructured(ctx, target, plan.InTarget(o.ObjectRef))
				if err != nil {
					return err
				}
				return target.Update(ctx, obj, client.DryRunAll)
			})
		})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
			mu.Lock()
			refusals = append(refusals, Refusal{Object: o.ObjectRef, Message: err.Error()})
			mu.Unlock()
			return nil
		default:
			return fmt.Errorf("checking %s with the target's webhooks: %w", o.ObjectRef, err)
		}
	})
	slices.SortFunc(refusals, func(a, b Refusal) int { return strings.Compare(a.Object.String(), b.Object.String()) })
	return refusals, err
}

// Sample returns the first object of every kind of the plan, in creation
// order, leaving out what the move found in the target and did not copy.
func Sample(plan *graph.Plan) []*graph.Object {
	seen := map[string]bool{}
	var out []*graph.Object
	for _, o := range plan.Objects() {
		k := o.GVK.String()
		if o.FoundInTarget || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	return out
}

// Copied returns every object of the plan the move copied (all but what it
// found in the target).
func Copied(plan *graph.Plan) []*graph.Object {
	var out []*graph.Object
	for _, o := range plan.Objects() {
		if !o.FoundInTarget {
			out = append(out, o)
		}
	}
	return out
}
