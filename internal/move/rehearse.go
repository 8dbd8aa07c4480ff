package move

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/graph"
)

// RehearseDeletion asks the source's admission whether it lets the move
// delete what the plan deletes, with dry-run requests that change nothing.
// Past the point of no return a deletion the source refuses (a policy or a
// webhook the bypass does not cover that protects Clusters from deletion)
// is retried for ever with every provider stopped; found before it, the
// move can still roll back.
//
// Each rehearsed object gets the requests Deleting will send it (see
// deleteForMove): the patch that marks it and drops its finalizers when it
// has any, then the DELETE, both with dryRun=All, which runs every
// validating webhook and admission policy. Rehearsed are one object of each
// kind in each namespace, and every Cluster, the kind deletion protection
// is written for; a policy that singles out other objects by their content
// is met only in Deleting. It returns the refusals, sorted; an error that
// says nothing of admission's answer (the source unreachable, a webhook
// that could not be called) is returned as an error. An object gone since
// the plan was read is not rehearsed, and neither is one behind a webhook
// that does not take dry-run requests: that says nothing of what it does
// with the real ones.
func RehearseDeletion(ctx context.Context, source client.Client, plan *graph.Plan, opts Options) ([]Refusal, error) {
	var mu sync.Mutex
	var refusals []Refusal
	err := forEach(ctx, deletionSample(plan), opts.concurrency(), func(ctx context.Context, o *graph.Object) error {
		err := retryTransient(ctx, func() error { return rehearseDeleteForMove(ctx, source, o) })
		switch {
		case err == nil, gone(err), strings.Contains(err.Error(), "does not support dry run"):
			return nil
		case transient(err) || !isAPIStatus(err) || strings.Contains(err.Error(), "failed calling webhook"):
			// No answer from admission: a webhook that could not be
			// called is not a refusal, and the caller retries (the
			// operator makes a bypass the API server ignores hold again
			// on that error) within its timeout.
			return fmt.Errorf("rehearsing the deletion of %s in the source: %w", o.ObjectRef, err)
		}
		mu.Lock()
		refusals = append(refusals, Refusal{Object: o.ObjectRef, Message: err.Error()})
		mu.Unlock()
		return nil
	})
	slices.SortFunc(refusals, func(a, b Refusal) int { return strings.Compare(a.Object.String(), b.Object.String()) })
	return refusals, err
}

// rehearseDeleteForMove sends deleteForMove's requests for o with dryRun=All.
func rehearseDeleteForMove(ctx context.Context, c client.Client, o *graph.Object) error {
	ref := o.ObjectRef
	obj := metadataObject(ref.GVK, ref.Namespace, ref.Name)
	if o.Finalizers {
		patch, err := deletionPatch(ref.UID)
		if err != nil {
			return err
		}
		if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.DryRunAll); err != nil {
			return err
		}
	}
	return c.Delete(ctx, obj, client.Preconditions{UID: &ref.UID}, client.DryRunAll)
}

// deletionSample is what RehearseDeletion rehearses: of the objects the plan
// deletes, the first of each kind in each namespace, and every Cluster.
func deletionSample(plan *graph.Plan) []*graph.Object {
	seen := map[string]bool{}
	var out []*graph.Object
	for _, o := range plan.Objects() {
		if !o.Delete {
			continue
		}
		k := o.GVK.String() + " " + o.Namespace
		if seen[k] && o.GroupKind() != graph.ClusterGroupKind {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	return out
}

func isAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
