//go:build cluster

package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/move-operator/move-operator/test/capioperator"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

func TestMain(m *testing.M) {
	// The first time on a machine, the real cluster-api-operator's binary
	// is built (minutes): begin while the clusters start, rather than when
	// the first test that runs it asks for it (capioperator.Binary builds
	// once; that test waits for what is left, and reports its error).
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		_, _ = capioperator.Binary(ctx)
	}()
	movetest.Main(m, testenv.Options{CAPI: true})
}
