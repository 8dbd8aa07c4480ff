package convert_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
)

// TestLostGoingBack checks what Lost reports of v1beta2 objects going back
// to v1beta1: nothing for objects that came from v1beta1, and by path the
// values v1beta1 has no field for.
func TestLostGoingBack(t *testing.T) {
	for _, in := range converttest.Objects(ns) {
		t.Run(fmt.Sprintf("a %s that came from v1beta1 loses nothing going back", in.GetKind()), func(t *testing.T) {
			lost, err := convert.Lost(context.Background(), up(t, in), in.GroupVersionKind().Version)
			if err != nil {
				t.Fatal(err)
			}
			if len(lost) > 0 {
				t.Errorf("Lost = %v, want none", lost)
			}
		})
	}

	set := func(kind, name string, fields map[string]any) *unstructured.Unstructured {
		o := up(t, fixture(t, kind, name))
		for path, v := range fields {
			if err := unstructured.SetNestedField(o.Object, v, strings.Split(path, ".")...); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want []string
	}{
		{
			name: "a Machine's v1beta2-only fields cannot go back: v1beta1 keeps them only in the annotation",
			obj: set("Machine", "prod-md-0-7b9c4-xk2lp", map[string]any{
				"spec.minReadySeconds":                  int64(15),
				"status.failureDomain":                  "fd2",
				"spec.deletion.nodeDrainTimeoutSeconds": int64(90), // has a v1beta1 place: nodeDrainTimeout
			}),
			want: []string{"spec.minReadySeconds", "status.failureDomain"},
		},
		{
			// v1beta1 has one control plane timeout for init and join
			// (clusterConfiguration.apiServer.timeoutForControlPlane):
			// going back, the init one becomes the join one too.
			name: "a KubeadmConfig's kubelet health check timeout cannot go back, nor a control plane timeout for init alone",
			obj: set("KubeadmConfig", "prod-mp-0", map[string]any{
				"spec.initConfiguration.timeouts.kubeletHealthCheckSeconds":               int64(120),
				"spec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds": int64(300),
			}),
			want: []string{"spec.initConfiguration.timeouts.kubeletHealthCheckSeconds", "spec.joinConfiguration.timeouts"},
		},
		{
			name: "a boolean set to false is not lost: v1beta1 cannot tell false from unset, and neither can its controllers",
			obj:  set("Cluster", "prod", map[string]any{"spec.paused": false}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lost, err := convert.Lost(context.Background(), tt.obj, "v1beta1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, lost); diff != "" {
				t.Errorf("Lost (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("what the cluster it goes to prunes at the older version cannot go back either, named by its newer path", func(t *testing.T) {
		mhc := up(t, fixture(t, "MachineHealthCheck", "prod-md-0-unhealthy"))
		// As Cluster API v1.10's CRD, which has no such v1beta1 field.
		prune := func(older *unstructured.Unstructured) error {
			unstructured.RemoveNestedField(older.Object, "spec", "unhealthyMachineConditions")
			return nil
		}
		lost, err := convert.LostIn(context.Background(), mhc, "v1beta1", prune)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"spec.checks.unhealthyMachineConditions"}, lost); diff != "" {
			t.Errorf("LostIn (-want +got):\n%s", diff)
		}
		if lost, _ := convert.Lost(context.Background(), mhc, "v1beta1"); len(lost) > 0 {
			t.Errorf("Lost = %v, want none: v1.14's v1beta1 type holds the field", lost)
		}
	})

	t.Run("what cannot go back is asked of the v1beta2 object, not of the v1beta1 one", func(t *testing.T) {
		_, err := convert.Lost(context.Background(), fixture(t, "Machine", "prod-md-0-7b9c4-xk2lp"), "v1beta2")
		if err == nil || !strings.Contains(err.Error(), "checked from v1beta2") {
			t.Errorf("Lost of a v1beta1 object = %v, want an error saying it is checked from v1beta2", err)
		}
	})
	t.Run("a provider's kind is refused as Convert refuses it", func(t *testing.T) {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
		o.SetKind("DockerMachine")
		_, err := convert.Lost(context.Background(), o, "v1beta1")
		if !convert.IsUnsupported(err) {
			t.Errorf("Lost of a DockerMachine = %v, want an UnsupportedError", err)
		}
	})
}
