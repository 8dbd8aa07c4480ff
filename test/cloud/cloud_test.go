package cloud_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/move-operator/move-operator/test/cloud"
)

var caller = cloud.Caller{ManagementCluster: "source", Kind: "LoopMachine", Namespace: "ns", Name: "m-1"}

func TestTheEventLogRecordsEveryChangeWithWhoAsked(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := cloud.New()
	vm, err := c.CreateVM(ctx, caller, cloud.VMSpec{Name: "ns/m-1", Flavor: "small"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Power).To(Equal(cloud.PoweredOn))
	g.Expect(vm.Address).To(HavePrefix("127."), "addresses are loopback only")
	g.Expect(c.PowerOffVM(ctx, caller, vm.ID)).To(Succeed())
	g.Expect(c.PowerOffVM(ctx, caller, vm.ID)).To(Succeed(), "powering off twice changes nothing")
	g.Expect(c.DeleteVM(ctx, caller, vm.ID)).To(Succeed())
	g.Expect(c.DeleteVM(ctx, caller, vm.ID)).To(MatchError(cloud.ErrNotFound))
	g.Expect(c.VMs()).To(BeEmpty())

	events := c.Events()
	g.Expect(events).To(HaveLen(3))
	var types []cloud.EventType
	for i, e := range events {
		types = append(types, e.Type)
		g.Expect(e.Seq).To(Equal(int64(i + 1)))
		g.Expect(e.Caller).To(Equal(caller))
		g.Expect(e.VMID).To(Equal(vm.ID))
	}
	g.Expect(types).To(Equal([]cloud.EventType{cloud.Created, cloud.PowerOff, cloud.Deleted}))
	g.Expect(c.EventsSince(2)).To(HaveLen(1))
}

func TestAHeldCallBlocksItsCallerUntilReleasedAndThenTakesEffect(t *testing.T) {
	g := NewWithT(t)
	c := cloud.New()
	hold := c.Hold(func(call cloud.Call) bool { return call.Type == cloud.Created })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan cloud.VM)
	go func() {
		vm, _ := c.CreateVM(ctx, caller, cloud.VMSpec{Name: "ns/m-1"})
		done <- vm
	}()
	g.Eventually(hold.Arrived()).Should(BeClosed())
	cancel() // the caller gives up: the request is already with the cloud
	g.Consistently(done, 200*time.Millisecond).ShouldNot(Receive())
	g.Expect(c.Events()).To(BeEmpty(), "nothing happened yet")
	hold.Release()
	var vm cloud.VM
	g.Eventually(done).Should(Receive(&vm))
	g.Expect(c.FindVMs("ns/m-1")).To(ConsistOf(vm))
	g.Expect(hold.Calls()).To(HaveLen(1))
}

func TestCloseReleasesEveryHold(t *testing.T) {
	g := NewWithT(t)
	c := cloud.New()
	c.Hold(nil)
	done := make(chan struct{})
	go func() {
		_, _ = c.CreateVM(context.Background(), caller, cloud.VMSpec{Name: "ns/m-1"})
		close(done)
	}()
	c.Close()
	g.Eventually(done).Should(BeClosed())
}

func TestEveryProvisionIsLoggedWithTheHostTheImageAndWhoAsked(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := cloud.New()
	host := cloud.Caller{ManagementCluster: "target", Kind: "BareMetalHost", Namespace: "ns", Name: "h-1"}
	g.Expect(c.Provision(ctx, host, "ns/h-1", "node-v1.34.2")).To(Succeed())
	g.Expect(c.Provision(ctx, host, "ns/h-1", "node-v1.34.2")).To(Succeed(), "a host provisioned again is wiped again")
	g.Expect(c.Provision(ctx, host, "", "node-v1.34.2")).NotTo(Succeed())

	events := c.Events()
	g.Expect(events).To(HaveLen(2))
	for _, e := range events {
		g.Expect(e.Type).To(Equal(cloud.Provision))
		g.Expect(e.Host).To(Equal("ns/h-1"))
		g.Expect(e.Image).To(Equal("node-v1.34.2"))
		g.Expect(e.Caller).To(Equal(host))
		g.Expect(e.VMID).To(BeEmpty())
	}
	g.Expect(c.VMs()).To(BeEmpty(), "a host is not a VM")
}
