//go:build cluster

package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/cluster-api/feature"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/localcluster"
)

// cluster is the package's one local cluster, with Cluster API installed.
var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Without a logger controller-runtime prints a stack trace the first
	// time an in-process webhook logs.
	ctrllog.SetLogger(logr.Discard())
	// As `clusterctl init` with EXP_RUNTIME_SDK=true: ExtensionConfigs are
	// refused by their webhook otherwise. The in-process webhooks read the
	// process's feature gates.
	if err := feature.MutableGates.Set(string(feature.RuntimeSDK) + "=true"); err != nil {
		fmt.Fprintf(os.Stderr, "enabling the RuntimeSDK feature gate: %v\n", err)
		return 1
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := localcluster.Start(ctx, "convert", localcluster.Options{Logf: logf})
	if err != nil {
		logf("starting the local cluster: %v", err)
		return 1
	}
	cluster = c
	inst, err := capiprovider.Install(ctx, c, capiprovider.Options{Logf: logf})
	if err != nil {
		logf("installing Cluster API: %v", err)
		_ = c.Stop()
		return 1
	}
	logf("one local cluster with Cluster API %s installed in %s (cluster %s, install %s)",
		inst.Provider(capiprovider.CoreProvider).Version, time.Since(began).Round(time.Millisecond),
		c.StartupDuration.Round(time.Millisecond), inst.Duration.Round(time.Millisecond))

	code := m.Run()
	// Stopping the cluster stops the installation's webhook servers too.
	if err := c.Stop(); err != nil {
		logf("stopping the local cluster: %v", err)
		if code == 0 {
			code = 1
		}
	}
	if code != 0 {
		logf("process logs of the local cluster kept in %s", c.LogDir)
		return code
	}
	if err := c.RemoveLogs(); err != nil {
		logf("%v", err)
	}
	return code
}
