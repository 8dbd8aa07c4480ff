//go:build cluster

package acrosscontracts_test

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/cluster-api/feature"

	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// TestMain starts the package's pair, both with Cluster API v1.14 installed
// (its providers, their webhooks and the clusterctl inventory); the tests
// then give the source v1.10's CRDs of Cluster API's own kinds (see
// olderClusterAPIInSource).
func TestMain(m *testing.M) {
	// As `clusterctl init` with EXP_RUNTIME_SDK=true: the fleet holds an
	// ExtensionConfig, which the target's webhooks, served in-process and
	// reading the process's feature gates, refuse otherwise.
	if err := feature.MutableGates.Set(string(feature.RuntimeSDK) + "=true"); err != nil {
		fmt.Fprintf(os.Stderr, "enabling the RuntimeSDK feature gate: %v\n", err)
		os.Exit(1)
	}
	movetest.Main(m, testenv.Options{CAPI: true})
}
