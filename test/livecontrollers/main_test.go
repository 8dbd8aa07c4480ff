//go:build cluster

package livecontrollers_test

import (
	"testing"

	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// Hosts for the hosts test (the other tests' fleets have none);
	// SelfHosted for the pivot test; InMemory (CAPD) for its takeover test.
	testenv.Main(m, testenv.Options{CAPI: true, Controllers: true, Hosts: true, SelfHosted: true, InMemory: true}, &env)
}
