// Package inmemorycloud is the cloud behind Cluster API's in-memory
// infrastructure provider (the in-memory backend of CAPD's DevCluster and
// DevMachine, sigs.k8s.io/cluster-api/test/infrastructure): its VMs
// (CloudMachines), the Nodes, etcd members and control-plane pods of each
// workload cluster, and the fake workload API servers and etcd that answer
// the Cluster API controllers. One per test environment, outside both
// management clusters and shared by them, as a real cloud account is.
//
//	c, err := inmemorycloud.New()
//	defer c.Stop()
//	capd := c.ManagerFor("source") // what the source's CAPD reconcilers get
//	c.Events()                     // every VM created or deleted, and by whom
//
// Why the test environment owns it: upstream, the cloud lives in the CAPD
// process. Stopped, as a move stops every provider, it forgets every VM, and
// on restart CAPD quietly creates them again; the target's CAPD would create
// its own. Neither is what a real cloud does. Shared and outliving the
// controllers, it behaves like one: the target's CAPD finds the VMs the
// source's created, by the same resource group (the Cluster's
// namespace/name) and the same control-plane endpoint, and the record of
// creations and deletions is an independent witness of what a move did to
// the machines.
//
// What is recorded: every CloudMachine created or deleted through a
// management cluster's manager (ManagerFor), and every CloudMachine of a
// resource group deleted whole (a DevCluster's deletion), each with the
// management cluster that asked. Nodes and pods of the workload clusters are
// not recorded: they follow their VM.
//
// The workload API servers listen on 127.0.0.1, on ports of a block picked
// at random below the kernel's ephemeral range, so that test packages
// running at once do not collide, and no connection's local end takes a
// port a workload cluster is given.
package inmemorycloud
