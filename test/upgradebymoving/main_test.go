//go:build cluster

package upgradebymoving_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/move-operator/move-operator/test/capirelease"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

// TestMain builds Cluster API v1.10.9's managers first (minutes the first
// time on a machine, a stat each later, so that no cluster idles while
// they build), then starts the pair: the source on v1.10.9, the target on
// this module's Cluster API, controllers live in both.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	_, _, err := capirelease.Binaries(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building Cluster API %s: %v\n", capirelease.Version, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{CAPI: true, Controllers: true, OlderClusterAPIInSource: true}, &env)
}
