package cloud

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ErrNotFound is returned for a VM that does not exist (or no longer does).
var ErrNotFound = errors.New("vm not found")

// PowerState is a VM's power state.
type PowerState string

// Power states.
const (
	PoweredOn  PowerState = "PoweredOn"
	PoweredOff PowerState = "PoweredOff"
)

// EventType names a state-changing call.
type EventType string

// Event types, one per state-changing call.
const (
	Created  EventType = "Create"
	Deleted  EventType = "Delete"
	PowerOff EventType = "PowerOff"
	PowerOn  EventType = "PowerOn"
	// Provision writes an image to a bare-metal host's disk, wiping
	// whatever the host ran: the one call of a host's controller that
	// destroys a machine without deleting anything.
	Provision EventType = "Provision"
)

// Caller says who made a call: the management cluster whose controller made
// it and the object it was reconciling.
type Caller struct {
	ManagementCluster string
	Kind              string
	Namespace         string
	Name              string
}

func (c Caller) String() string {
	return fmt.Sprintf("%s: %s %s/%s", c.ManagementCluster, c.Kind, c.Namespace, c.Name)
}

// VMSpec is what CreateVM is asked for.
type VMSpec struct {
	// Name need not be unique, as in most clouds; providers find their VMs
	// again by ID, or by name when the ID was never recorded.
	Name          string
	Flavor        string
	FailureDomain string
	// Address, if set, is the private address asked for (clouds let one
	// choose it in the subnet); otherwise one is allocated.
	Address string
}

// VM is a virtual machine of the simulated cloud.
type VM struct {
	ID            string
	Name          string
	Flavor        string
	FailureDomain string
	Power         PowerState
	// Address is a loopback address nothing listens on.
	Address string
	Created time.Time
	// CreatedBy is the caller of the create.
	CreatedBy Caller
}

// Event is one entry of the cloud's append-only log.
type Event struct {
	// Seq numbers events from 1, in the order they took effect.
	Seq  int64
	Time time.Time
	Type EventType
	// VMID and VMName name the VM of a VM event; empty for a Provision.
	VMID   string
	VMName string
	// Host names the bare-metal host of a Provision, and Image what was
	// written to its disk; empty for a VM event.
	Host   string
	Image  string
	Caller Caller
}

// Call describes a call on its way in, for Hold to match.
type Call struct {
	Type   EventType
	Caller Caller
	// VMName is the name of the VM created, or of the VM acted on.
	VMName string
	// VMID is empty for a create.
	VMID string
	// Host is the bare-metal host of a Provision.
	Host string
}

// Cloud is one simulated cloud account. It is safe for concurrent use.
type Cloud struct {
	mu     sync.Mutex
	vms    map[string]*VM
	events []Event
	nextVM int
	holds  []*Hold
	closed bool
}

// New returns an empty cloud.
func New() *Cloud {
	return &Cloud{vms: map[string]*VM{}}
}

// CreateVM creates a powered-on VM and returns it.
func (c *Cloud) CreateVM(_ context.Context, caller Caller, spec VMSpec) (VM, error) {
	if spec.Name == "" {
		return VM{}, errors.New("creating a vm: name is empty")
	}
	c.waitIfHeld(Call{Type: Created, Caller: caller, VMName: spec.Name})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextVM++
	vm := &VM{
		ID:            fmt.Sprintf("vm-%06d", c.nextVM),
		Name:          spec.Name,
		Flavor:        spec.Flavor,
		FailureDomain: spec.FailureDomain,
		Power:         PoweredOn,
		Address:       spec.Address,
		Created:       time.Now(),
		CreatedBy:     caller,
	}
	if vm.Address == "" {
		vm.Address = fmt.Sprintf("127.101.%d.%d", (c.nextVM/250)%250, c.nextVM%250+2)
	}
	c.vms[vm.ID] = vm
	c.logLocked(Created, vm, caller)
	return *vm, nil
}

// DeleteVM deletes a VM.
func (c *Cloud) DeleteVM(_ context.Context, caller Caller, id string) error {
	c.waitIfHeld(Call{Type: Deleted, Caller: caller, VMName: c.nameOf(id), VMID: id})
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id]
	if !ok {
		return fmt.Errorf("deleting %s: %w", id, ErrNotFound)
	}
	delete(c.vms, id)
	c.logLocked(Deleted, vm, caller)
	return nil
}

// PowerOffVM powers a VM off; powering off a VM already off changes nothing
// and logs nothing.
func (c *Cloud) PowerOffVM(ctx context.Context, caller Caller, id string) error {
	return c.setPower(ctx, caller, id, PoweredOff, PowerOff)
}

// PowerOnVM powers a VM on; powering on a VM already on changes nothing and
// logs nothing.
func (c *Cloud) PowerOnVM(ctx context.Context, caller Caller, id string) error {
	return c.setPower(ctx, caller, id, PoweredOn, PowerOn)
}

func (c *Cloud) setPower(_ context.Context, caller Caller, id string, state PowerState, event EventType) error {
	c.waitIfHeld(Call{Type: event, Caller: caller, VMName: c.nameOf(id), VMID: id})
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id]
	if !ok {
		return fmt.Errorf("powering %s %s: %w", id, state, ErrNotFound)
	}
	if vm.Power != state {
		vm.Power = state
		c.logLocked(event, vm, caller)
	}
	return nil
}

// Provision writes image to the disk of the bare-metal host named host,
// as Ironic does for Metal3: whatever ran on the host is gone. Every call
// provisions again, whatever the host held: the cloud does not know which
// image a host should keep, its caller does.
func (c *Cloud) Provision(_ context.Context, caller Caller, host, image string) error {
	if host == "" {
		return errors.New("provisioning a host: name is empty")
	}
	c.waitIfHeld(Call{Type: Provision, Caller: caller, Host: host})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appendLocked(Event{Type: Provision, Host: host, Image: image, Caller: caller})
	return nil
}

// GetVM returns the VM with the given ID.
func (c *Cloud) GetVM(id string) (VM, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id]
	if !ok {
		return VM{}, fmt.Errorf("getting %s: %w", id, ErrNotFound)
	}
	return *vm, nil
}

// FindVMs returns the existing VMs named name, oldest first.
func (c *Cloud) FindVMs(name string) []VM {
	var out []VM
	for _, vm := range c.VMs() {
		if vm.Name == name {
			out = append(out, vm)
		}
	}
	return out
}

// VMs returns every existing VM, ordered by ID (creation order).
func (c *Cloud) VMs() []VM {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]VM, 0, len(c.vms))
	for _, vm := range c.vms {
		out = append(out, *vm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Events returns a copy of the event log.
func (c *Cloud) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// EventsSince returns the events with a sequence number above seq.
func (c *Cloud) EventsSince(seq int64) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.events), func(i int) bool { return c.events[i].Seq > seq })
	return append([]Event(nil), c.events[i:]...)
}

// LastSeq is the sequence number of the latest event, 0 if none.
func (c *Cloud) LastSeq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		return 0
	}
	return c.events[len(c.events)-1].Seq
}

func (c *Cloud) logLocked(t EventType, vm *VM, caller Caller) {
	c.appendLocked(Event{Type: t, VMID: vm.ID, VMName: vm.Name, Caller: caller})
}

// appendLocked numbers, stamps and logs e.
func (c *Cloud) appendLocked(e Event) {
	e.Seq = int64(len(c.events) + 1)
	e.Time = time.Now()
	c.events = append(c.events, e)
}

func (c *Cloud) nameOf(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if vm, ok := c.vms[id]; ok {
		return vm.Name
	}
	return ""
}
