//go:build cluster

package livecontrollers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/testenv"
)

func TestADeletedLoopMachineTakesItsVMUnlessDeletedForAMove(t *testing.T) {
	ctx := context.Background()
	m := env.Source
	ns := testenv.NewNamespace(t, m, "deletion")
	for _, tc := range []struct {
		name      string
		forMove   bool
		wantVMs   int
		wantTypes []cloud.EventType
	}{
		{name: "plain", forMove: false, wantVMs: 0, wantTypes: []cloud.EventType{cloud.PowerOff, cloud.Deleted}},
		{name: "moved", forMove: true, wantVMs: 1, wantTypes: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			lm := machineFor(t, m, ns, tc.name, false)
			g.Eventually(func(g Gomega) string { return providerID(ctx, g, m, lm) }, 60*time.Second).ShouldNot(BeEmpty())
			vm := ns + "/" + tc.name
			g.Expect(env.Cloud.FindVMs(vm)).To(HaveLen(1))
			seq := env.Cloud.LastSeq()
			if tc.forMove {
				patch := client.MergeFrom(lm.DeepCopy())
				annotations := lm.GetAnnotations()
				if annotations == nil {
					annotations = map[string]string{}
				}
				annotations[clusterctlv1.DeleteForMoveAnnotation] = ""
				lm.SetAnnotations(annotations)
				g.Expect(m.Client.Patch(ctx, lm, patch)).To(Succeed())
			}
			g.Expect(m.Client.Delete(ctx, lm)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(m.Client.Get(ctx, client.ObjectKeyFromObject(lm), lm))
			}, 30*time.Second).Should(BeTrue(), "the provider removes its finalizer")
			g.Expect(env.Cloud.FindVMs(vm)).To(HaveLen(tc.wantVMs))
			var types []cloud.EventType
			for _, e := range env.Cloud.EventsSince(seq) {
				if e.VMName == vm {
					types = append(types, e.Type)
					g.Expect(e.Caller).To(Equal(cloud.Caller{ManagementCluster: m.Name, Kind: loopprovider.MachineKind, Namespace: ns, Name: tc.name}))
				}
			}
			g.Expect(types).To(Equal(tc.wantTypes))
		})
	}
}
