package v1alpha1_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// The Go defaults restate the CRD's markers (markers cannot name Go
// constants); this holds the two together, so that changing one without the
// other fails.
func TestTheDefaultsAreTheCRDs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "move.cluster.x-k8s.io_moveoperations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	// defaultOf is the JSON of the CRD's default for a spec field.
	defaultOf := func(path ...string) string {
		t.Helper()
		p := spec
		for _, name := range path {
			next, ok := p.Properties[name]
			if !ok {
				t.Fatalf("the CRD has no spec.%v", path)
			}
			p = next
		}
		if p.Default == nil {
			t.Fatalf("the CRD gives spec.%v no default", path)
		}
		return string(p.Default.Raw)
	}
	unquote := func(raw string) string {
		t.Helper()
		s, err := strconv.Unquote(raw)
		if err != nil {
			t.Fatalf("the default %s is not a string: %v", raw, err)
		}
		return s
	}
	var unset movev1alpha1.TimeoutsSpec
	for _, c := range []struct {
		field string
		got   time.Duration
	}{
		{"scaleDown", unset.ScaleDownTimeout()},
		{"scaleUp", unset.ScaleUpTimeout()},
		{"blockMove", unset.BlockMoveTimeout()},
		{"copy", unset.CopyTimeout()},
	} {
		t.Run("spec.timeouts."+c.field+" defaults to the CRD's value", func(t *testing.T) {
			want, err := time.ParseDuration(unquote(defaultOf("timeouts", c.field)))
			if err != nil {
				t.Fatal(err)
			}
			if c.got != want {
				t.Errorf("Go default %s, CRD default %s", c.got, want)
			}
		})
	}
	t.Run("spec.target.kubeconfigSecretRef.key defaults to the CRD's value", func(t *testing.T) {
		if got, want := (movev1alpha1.SecretKeyReference{}).KeyOrDefault(), unquote(defaultOf("target", "kubeconfigSecretRef", "key")); got != want {
			t.Errorf("Go default %q, CRD default %q", got, want)
		}
	})
	t.Run("spec.controllers.fallbackReplicas defaults to the CRD's value", func(t *testing.T) {
		got := (movev1alpha1.ControllersSpec{}).FallbackReplicasOrDefault()
		if want := defaultOf("controllers", "fallbackReplicas"); strconv.Itoa(int(got)) != want {
			t.Errorf("Go default %d, CRD default %s", got, want)
		}
	})
	t.Run("spec.objectStatusPolicy has no CRD default, so that the deprecated spec.status can still choose", func(t *testing.T) {
		if d := spec.Properties["objectStatusPolicy"].Default; d != nil {
			t.Errorf("CRD default %s: a defaulted objectStatusPolicy would override a manifest's spec.status", d.Raw)
		}
		if _, ok := spec.Properties["objectStatusPolicy"]; !ok {
			t.Fatal("the CRD has no spec.objectStatusPolicy")
		}
		if got := (movev1alpha1.MoveOperationSpec{}).ObjectStatusPolicyOrDefault(); got != movev1alpha1.ObjectStatusRebuild {
			t.Errorf("unset: %q, want Rebuild", got)
		}
	})
	t.Run("the deprecated spec.status chooses when objectStatusPolicy is unset, and objectStatusPolicy wins otherwise", func(t *testing.T) {
		old := movev1alpha1.MoveOperationSpec{DeprecatedStatus: movev1alpha1.ObjectStatusCarry}
		if got := old.ObjectStatusPolicyOrDefault(); got != movev1alpha1.ObjectStatusCarry || !old.CarriesStatus() {
			t.Errorf("status: Carry alone gives %q", got)
		}
		both := movev1alpha1.MoveOperationSpec{ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry, DeprecatedStatus: movev1alpha1.ObjectStatusCarry}
		if !both.CarriesStatus() {
			t.Errorf("both Carry do not carry")
		}
	})
}
