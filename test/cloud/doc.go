// Package cloud is the simulated cloud account behind the loop
// infrastructure provider: one per test environment, outside both
// management clusters and shared by them, as a real cloud account is shared
// by every management cluster holding credentials for it.
//
//	c := cloud.New()
//	vm, err := c.CreateVM(ctx, cloud.Caller{ManagementCluster: "source", Kind: "LoopMachine", Namespace: "ns", Name: "m-1"}, cloud.VMSpec{Name: "ns/m-1"})
//	events := c.Events() // create, delete, power off, with who asked
//
// What it holds: virtual machines with an ID, a name, a flavor, a failure
// domain, a power state and addresses, and an append-only event log of every
// state-changing call (create, delete, power off, power on, and the
// provisioning of a bare-metal host), each naming the management cluster
// and the object on whose behalf it was made. Reads are not logged.
// Bare-metal hosts are known only by name, through their Provision events:
// the cloud keeps no inventory of them (package hostprovider keeps what a
// host holds in its BareMetalHost's status, as Metal3 does).
//
// What is simulated, and what differs from a real cloud: calls complete at
// once (no provisioning delay, no API rate limits, no eventual
// consistency); VMs run nothing; their addresses are loopback addresses that
// nothing listens on. A test can hold calls open on demand (Hold): a held
// call blocks its caller until released, whatever the caller's context says,
// and takes effect when released, as a cloud API request already sent
// completes on the cloud's side even if the client gives up. That is the
// "slow worker still in flight" of a real provider.
//
// The package never talks to a Kubernetes cluster.
package cloud
