package inmemorycloud

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	inmemoryresourcegroup "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/resourcegroup"
)

// recordingManager is the cloud's store as one management cluster's CAPD
// uses it: every call goes to the shared store, and the VMs created and
// deleted are recorded with the caller.
type recordingManager struct {
	inmemoryruntime.Manager
	cloud  *Cloud
	caller string
}

// Start is a no-op: the cloud started the store, and it outlives every CAPD
// that uses it.
func (m *recordingManager) Start(context.Context) error { return nil }

// DeleteResourceGroup records the group's VMs as deleted: CAPD deletes a
// workload cluster's group whole when its DevCluster goes, without deleting
// the VMs one by one.
func (m *recordingManager) DeleteResourceGroup(name string) {
	list := &cloudv1.CloudMachineList{}
	if err := m.Manager.GetResourceGroup(name).GetClient().List(context.Background(), list); err == nil {
		for _, vm := range list.Items {
			m.cloud.record(Deleted, m.caller, name, vm.Name)
		}
	}
	m.Manager.DeleteResourceGroup(name)
}

func (m *recordingManager) GetResourceGroup(name string) inmemoryresourcegroup.ResourceGroup {
	return recordingGroup{group: name, client: m.Manager.GetResourceGroup(name).GetClient(), m: m}
}

type recordingGroup struct {
	group  string
	client inmemoryclient.Client
	m      *recordingManager
}

func (g recordingGroup) GetClient() inmemoryclient.Client {
	return &recordingClient{Client: g.client, group: g.group, m: g.m}
}

// recordingClient records the CloudMachines its writes create and delete.
type recordingClient struct {
	inmemoryclient.Client
	group string
	m     *recordingManager
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object) error {
	err := c.Client.Create(ctx, obj)
	if _, vm := obj.(*cloudv1.CloudMachine); vm && err == nil {
		c.m.cloud.record(Created, c.m.caller, c.group, obj.GetName())
	}
	return err
}

func (c *recordingClient) Delete(ctx context.Context, obj client.Object) error {
	err := c.Client.Delete(ctx, obj)
	if _, vm := obj.(*cloudv1.CloudMachine); vm && err == nil {
		c.m.cloud.record(Deleted, c.m.caller, c.group, obj.GetName())
	}
	return err
}
