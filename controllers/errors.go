package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
)

// lastError is the last error reported for a MoveOperation, and whether
// its repetition was reported as an event.
type lastError struct {
	message  string
	repeated bool
}

// reportError counts every error (move_operator_reconcile_errors_total),
// logs it the first time it comes, and records a Warning
// event the first time it comes again in a row: a step that keeps failing
// the same way is what a user looking at a stuck move needs to see, once,
// in the MoveOperation's events. mo is nil when the MoveOperation could
// not be read.
func (r *MoveOperationReconciler) reportError(ctx context.Context, key types.NamespacedName, mo *movev1alpha1.MoveOperation, err error) {
	phase := ""
	if mo != nil {
		phase = string(phaseOf(mo))
	}
	reconcileErrors.WithLabelValues(phase).Inc()
	msg := err.Error()
	v, _ := r.lastErrors.Load(key)
	last, _ := v.(lastError)
	if last.message != msg {
		r.lastErrors.Store(key, lastError{message: msg})
		log.FromContext(ctx).Info("retrying after an error", "error", msg)
		return
	}
	log.FromContext(ctx).V(1).Info("retrying after the same error", "error", msg)
	if !last.repeated && mo != nil {
		r.event(mo, "Warning", movev1alpha1.ReasonRetrying, string(phaseOf(mo)), "retrying after the same error twice: "+msg)
		r.lastErrors.Store(key, lastError{message: msg, repeated: true})
	}
}

// applyError handles a step's error, the one place that does: an
// authorizer's refusal fails the move at once (deniedOutcome); any other
// error is retried with the controller's backoff, and said in the status
// meanwhile.
func (s *scope) applyError(spec phaseSpec, err error) (ctrl.Result, error) {
	if o, denied := deniedOutcome(err); denied {
		return s.apply(spec, o)
	}
	s.waiting = fmt.Sprintf("retrying after an error: %v", err)
	return ctrl.Result{}, err
}

// retryDenied is how soon a move stalled on a denied request (past the
// point of no return, or rolling back) tries again: a human adds the rule.
const retryDenied = 30 * time.Second

// deniedOutcome turns an authorizer's refusal (RBAC changed during the
// move, or a rule the access check could not foresee) into a failure with
// AccessDenied, at once: retrying cannot help until a human grants the
// rule, and before the point of no return a rollback beats waiting out the
// phase's timeout with every provider stopped. Where the table has nowhere
// to fail to, scope.fail stalls the move for that human instead, and the
// step is tried again after retryDenied. Any other 403 (an admission
// webhook's, a namespace being terminated) is not a refusal and is
// retried as before.
func deniedOutcome(err error) (outcome, bool) {
	d, ok := access.Denied(err)
	if !ok {
		return outcome{}, false
	}
	// Which cluster refused is not kept by the error; the identity the
	// message names tells them apart.
	o := failWith(movev1alpha1.ReasonAccessDenied, access.DeniedMessage("", d, err))
	o.after = retryDenied
	return o, true
}
