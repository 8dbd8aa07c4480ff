package inmemorycloud

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
)

// Host is the address the workload API servers listen on and the
// control-plane endpoints name.
const Host = "127.0.0.1"

// portBlock is how many ports one cloud may give workload clusters: far more
// than any fleet here (one per Cluster).
const portBlock = 500

// Op is what happened to a VM.
type Op string

// Ops of the event log.
const (
	Created Op = "create"
	Deleted Op = "delete"
)

// Event is one VM created or deleted.
type Event struct {
	Op Op
	// ManagementCluster is the cluster whose CAPD asked.
	ManagementCluster string
	// ResourceGroup is the workload cluster's (its Cluster's namespace/name).
	ResourceGroup string
	// VM is the CloudMachine's name (its DevMachine's name).
	VM string
	At time.Time
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s/%s by %s", e.Op, e.ResourceGroup, e.VM, e.ManagementCluster)
}

// Cloud is one in-memory cloud: the resource groups holding each workload
// cluster's VMs and objects, and the server answering for its API servers
// and etcd members.
type Cloud struct {
	manager inmemoryruntime.Manager
	mux     *inmemoryserver.WorkloadClustersMux
	stop    context.CancelFunc

	mu     sync.Mutex
	events []Event
}

// New starts a cloud: its object store and its workload API server mux.
func New() (*Cloud, error) {
	ctx, cancel := context.WithCancel(context.Background())
	m := inmemoryruntime.NewManager(newScheme())
	if err := m.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("starting the in-memory cloud: %w", err)
	}
	ports, err := freePorts()
	if err != nil {
		cancel()
		return nil, err
	}
	mux, err := inmemoryserver.NewWorkloadClustersMux(m, Host, ports)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("starting the in-memory cloud's API server mux: %w", err)
	}
	return &Cloud{manager: m, mux: mux, stop: cancel}, nil
}

// newScheme is the scheme of the cloud's store, as CAPD's main.go builds it:
// the cloud's own kinds and what a workload cluster holds.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		cloudv1.AddToScheme, corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme,
		storagev1.AddToScheme, apiextensionsv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// lowestPort is where the blocks start, as upstream's default range does.
const lowestPort = 20000

// freePorts picks a random block of ports whose first ports are free, for
// the debug server (the block's first) and the workload clusters (the
// rest). The blocks lie below the kernel's ephemeral port range: the mux
// does not check a port before it listens on it, and a port in that range
// may be any connection's local end by then (seen: "bind: address already
// in use", a workload cluster never reachable).
func freePorts() (inmemoryserver.CustomPorts, error) {
	blocks := (ephemeralLow() - lowestPort) / portBlock
	if blocks < 1 {
		return inmemoryserver.CustomPorts{}, fmt.Errorf("no room for %d ports between %d and the ephemeral port range", portBlock, lowestPort)
	}
	for range 20 {
		lowest := int32(lowestPort + rand.IntN(blocks)*portBlock)
		if portsFree(lowest, 10) {
			return inmemoryserver.CustomPorts{DebugPort: lowest, MinPort: lowest + 1, MaxPort: lowest + portBlock - 1}, nil
		}
	}
	return inmemoryserver.CustomPorts{}, errors.New("no free block of ports for the in-memory cloud")
}

// ephemeralLow is the lowest port the kernel gives a connection's local
// end (Linux's default when it cannot be read).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}

func portsFree(from, n int32) bool {
	for p := from; p < from+n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p)) //nolint:noctx // a probe, closed at once
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
}

// Mux is the server of the workload clusters' API servers and etcd members,
// for CAPD's reconcilers (APIServerMux).
func (c *Cloud) Mux() *inmemoryserver.WorkloadClustersMux { return c.mux }

// ManagerFor is the cloud as the CAPD of managementCluster sees it (its
// reconcilers' InMemoryManager): the same store, with the VMs it creates
// and deletes recorded in its name.
func (c *Cloud) ManagerFor(managementCluster string) inmemoryruntime.Manager {
	return &recordingManager{Manager: c.manager, cloud: c, caller: managementCluster}
}

// Events returns every VM created or deleted so far, in order.
func (c *Cloud) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// VMs lists the VMs of a workload cluster (its Cluster's namespace/name).
func (c *Cloud) VMs(ctx context.Context, resourceGroup string) ([]string, error) {
	list := &cloudv1.CloudMachineList{}
	if err := c.manager.GetResourceGroup(resourceGroup).GetClient().List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing the VMs of %s: %w", resourceGroup, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names, nil
}

// Stop stops the workload API servers and forgets every VM.
func (c *Cloud) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.mux.Shutdown(ctx)
	c.stop()
	return err
}

func (c *Cloud) record(op Op, caller, group, vm string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, Event{Op: op, ManagementCluster: caller, ResourceGroup: group, VM: vm, At: time.Now()})
}
