package hostprovider

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/move-operator/move-operator/test/cloud"
)

func TestAHostIsProvisionedOnceForItsConsumerAndAgainWhenItsStatusSaysOtherwise(t *testing.T) {
	consumer := &unstructured.Unstructured{}
	consumer.SetGroupVersionKind(consumerGVK)
	consumer.SetNamespace("ns")
	consumer.SetName("m-1")
	consumer.SetUID("uid-of-m-1")
	ref := ConsumerRef{APIVersion: consumerGVK.GroupVersion().String(), Kind: consumerGVK.Kind, Name: "m-1"}

	for _, tc := range []struct {
		name string
		// status is the host's status before the reconcile; nil: none.
		status     map[string]any
		consumer   bool
		provisions int
	}{
		{name: "a host without status is provisioned", consumer: true, provisions: 1},
		{name: "a host provisioned for its consumer is left alone", consumer: true, provisions: 0,
			status: provisionedStatus("uid-of-m-1")},
		{name: "a host provisioned for another object of the consumer's name is provisioned again", consumer: true, provisions: 1,
			status: provisionedStatus("uid-of-an-earlier-m-1")},
		{name: "a host whose consumer does not exist waits", consumer: false, provisions: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			host := NewHost("ns", "h-1", ref, "node-v1.34.2")
			if tc.status != nil {
				host.Object["status"] = tc.status
			}
			objs := []client.Object{host}
			if tc.consumer {
				objs = append(objs, consumer.DeepCopy())
			}
			c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objs...).WithStatusSubresource(newHost()).Build()
			clouds := cloud.New()
			activity := &Activity{}
			r := &reconciler{cache: c, reader: c, writer: c, opts: Options{Cloud: clouds, ManagementCluster: "target", Activity: activity}}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "h-1"}}

			for range 2 {
				_, err := r.Reconcile(context.Background(), req)
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(clouds.Events()).To(HaveLen(tc.provisions), "a second reconcile finds the status the first wrote")
			g.Expect(activity.Reconciled("ns", "h-1")).To(Equal(int64(2)))
			if !tc.consumer {
				return
			}
			got := newHost()
			g.Expect(c.Get(context.Background(), req.NamespacedName, got)).To(Succeed())
			g.Expect(ProvisioningState(got)).To(Equal(StateProvisioned))
			g.Expect(ProvisionedForUID(got)).To(Equal("uid-of-m-1"))
		})
	}
}

func provisionedStatus(consumerUID string) map[string]any {
	return map[string]any{
		"provisioning": map[string]any{"state": StateProvisioned, "image": "node-v1.34.2"},
		"consumerRef":  map[string]any{"name": "m-1", "uid": consumerUID},
	}
}
