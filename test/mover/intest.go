package mover

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/move-operator/move-operator/test/testenv"
)

// StartInTest starts the operator as users install it in source, moving
// to target, for the test t: it stops the operator when the test ends and
// prints the operator's log if the test failed. command names the test
// run in the error when the repository root cannot be found.
func StartInTest(t testing.TB, source, target *testenv.Management, command string) *Operator {
	t.Helper()
	root, err := testenv.RepositoryRoot(command)
	if err != nil {
		t.Fatal(err)
	}
	// Building the image, when make test has not, takes minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	op, err := StartOperatorIn(ctx, source, target, root, t.TempDir())
	if err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	t.Cleanup(func() {
		if err := op.Stop(); err != nil {
			t.Errorf("the operator stopped with: %v", err)
		}
		if t.Failed() {
			if log, err := os.ReadFile(op.LogPath()); err == nil {
				t.Logf("the operator's log:\n%s", log)
			}
		}
	})
	return op
}
