package controllers

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Reconcile hides its errors from controller-runtime's error counter (they
// go back as a plain requeue, logged once): each one is counted here
// instead, by phase, repeated or not.
func TestEveryReconcileErrorIsCountedByPhase(t *testing.T) {
	r := &MoveOperationReconciler{}
	mo := &movev1alpha1.MoveOperation{Status: movev1alpha1.MoveOperationStatus{Phase: movev1alpha1.PhaseValidating}}
	key := types.NamespacedName{Namespace: "ns", Name: "counted"}
	counter := reconcileErrors.WithLabelValues(string(movev1alpha1.PhaseValidating))
	unread := reconcileErrors.WithLabelValues("")
	before, beforeUnread := valueOf(t, counter), valueOf(t, unread)

	r.reportError(context.Background(), key, mo, errors.New("the target did not answer"))
	r.reportError(context.Background(), key, mo, errors.New("the target refused the token"))
	r.reportError(context.Background(), key, nil, errors.New("the MoveOperation could not be read"))

	if got := valueOf(t, counter) - before; got != 2 {
		t.Errorf("counted %v errors in Validating, want 2", got)
	}
	if got := valueOf(t, unread) - beforeUnread; got != 1 {
		t.Errorf("counted %v errors of an unread MoveOperation, want 1", got)
	}
}

// valueOf reads a counter's value.
func valueOf(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
