package controllers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// A stuck move retries the same error many times: it is logged once, in one
// line, and backed off like any error; a new error is logged again.
func TestARepeatedReconcileErrorIsLoggedOnceAndStillRetriedWithBackoff(t *testing.T) {
	s := runtime.NewScheme()
	if err := movev1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failure := errors.New("the API server is overloaded")
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			mu.Lock()
			defer mu.Unlock()
			return failure
		},
	}).Build()
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 0})
	ctx := log.IntoContext(context.Background(), logger)
	r := &MoveOperationReconciler{Client: c}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "stuck"}}

	reconcileN := func(n int) {
		t.Helper()
		for range n {
			res, err := r.Reconcile(ctx, req)
			if err != nil {
				t.Fatalf("Reconcile returned %v: controller-runtime would log it with a stack trace on every retry", err)
			}
			if !res.Requeue { //nolint:staticcheck // the rate-limited requeue is what is tested
				t.Fatalf("Reconcile returned %+v: the error must be retried with backoff", res)
			}
		}
	}
	reconcileN(19)
	if len(lines) != 1 || !strings.Contains(lines[0], "the API server is overloaded") {
		t.Fatalf("19 retries of one error logged %d lines, want 1 naming the error: %q", len(lines), lines)
	}
	mu.Lock()
	failure = errors.New("connection refused")
	mu.Unlock()
	reconcileN(3)
	if len(lines) != 2 || !strings.Contains(lines[1], "connection refused") {
		t.Fatalf("a new error must be logged once more: %q", lines)
	}
}
