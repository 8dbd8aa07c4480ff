package inmemorycloud

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestTheCloudRecordsEveryVMWithWhoAsked: a VM created through one
// management cluster's manager is found through the other's (the cloud is
// shared), and every create and delete is recorded with the caller, a
// resource group deleted whole included.
func TestTheCloudRecordsEveryVMWithWhoAsked(t *testing.T) {
	ctx := context.Background()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	source, target := c.ManagerFor("source"), c.ManagerFor("target")
	source.AddResourceGroup("ns/one")
	for _, name := range []string{"cp-0", "md-0"} {
		vm := &cloudv1.CloudMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := source.GetResourceGroup("ns/one").GetClient().Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	if vms, err := c.VMs(ctx, "ns/one"); err != nil || len(vms) != 2 {
		t.Fatalf("VMs = %v, %v; want cp-0 and md-0", vms, err)
	}
	found := &cloudv1.CloudMachine{}
	if err := target.GetResourceGroup("ns/one").GetClient().Get(ctx, keyOf("cp-0"), found); err != nil {
		t.Fatalf("the target does not find the source's VM: %v", err)
	}
	if err := target.GetResourceGroup("ns/one").GetClient().Delete(ctx, found); err != nil {
		t.Fatal(err)
	}
	target.DeleteResourceGroup("ns/one")

	want := []string{"create ns/one/cp-0 by source", "create ns/one/md-0 by source", "delete ns/one/cp-0 by target", "delete ns/one/md-0 by target"}
	got := c.Events()
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i, e := range got {
		if e.String() != want[i] {
			t.Errorf("event %d = %q, want %q", i, e, want[i])
		}
	}
}

func keyOf(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
