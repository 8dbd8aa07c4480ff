package quiesce

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

func TestFailedWebhooksNamesEveryWebhookTheAPIServerCouldNotCall(t *testing.T) {
	call := func(name string) error {
		return apierrors.NewInternalError(fmt.Errorf(`failed calling webhook %q: failed to call webhook: Post "https://svc.ns.svc:443/validate?timeout=10s": dial tcp 127.96.2.13:443: connect: connection refused`, name))
	}
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{"no error", nil, nil},
		{"another error", errors.New("the server is currently unable to handle the request"), nil},
		{"a webhook that answered no is not a failed call", errors.New(`admission webhook "validation.cluster.cluster.x-k8s.io" denied the request: spec.topology: Invalid value`), nil},
		{"one, wrapped", fmt.Errorf("deleting group 6 from the source: preparing for deletion: %w", call("validation.loopmachine.infrastructure.cluster.x-k8s.io")),
			[]string{"validation.loopmachine.infrastructure.cluster.x-k8s.io"}},
		{"several, aggregated, repeated, sorted", kerrors.NewAggregate([]error{call("validation.cluster.cluster.x-k8s.io"), call("default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io"), call("validation.cluster.cluster.x-k8s.io")}),
			[]string{"default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io", "validation.cluster.cluster.x-k8s.io"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailedWebhooks(tc.err); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("FailedWebhooks(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
