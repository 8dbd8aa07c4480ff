package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/move-operator/move-operator/test/testenv"
)

// The bench runs the operator with the soft memory limit its Deployment
// gives it: the manager container's memory limit.
func TestTheBenchRunsTheOperatorWithTheDeploymentsMemoryLimit(t *testing.T) {
	root, err := testenv.RepositoryRoot("go test")
	if err != nil {
		t.Fatal(err)
	}
	got, err := options{goMemLimit: "deployment"}.operatorGoMemLimit(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := resource.MustParse("256Mi"); got != want.AsDec().String() {
		t.Errorf("GOMEMLIMIT %q, want the manager's memory limit, 256Mi in bytes", got)
	}
	for value, want := range map[string]string{"off": "off", "": "off", "200MiB": "200MiB"} {
		if got, err := (options{goMemLimit: value}).operatorGoMemLimit(root); err != nil || got != want {
			t.Errorf("-operator-gomemlimit %q gave %q (%v), want %q", value, got, err, want)
		}
	}
}
