package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/workload"
)

// scenario is one situation a move meets, set up the same way for both
// movers on a settled fleet.
type scenario struct {
	id, title string
	// setup describes what the scenario does, for the report.
	setup string
	// arm prepares the fleet before the move and returns what to do while
	// it runs and after it.
	arm func(ctx context.Context, l *lab, f *fleet.Fleet, log *eventLog) (*armed, error)
	// hosts gives the fleet a BareMetalHost per worker, provisioned in
	// the source before the move.
	hosts bool
	// movers are the movers the scenario runs with; nil: defaultMovers.
	movers []string
	// capd makes the fleet a CAPD in-memory one (devFleet) instead of the
	// loop provider's.
	capd bool
	// drill makes the run the disaster drill (runDrill): a backup, the
	// loss of the fleet's management cluster, a restore into the target.
	drill bool
}

// moverList is the movers the scenario runs with, in order.
func (s scenario) moverList() []string {
	if s.movers == nil {
		return defaultMovers
	}
	return s.movers
}

// armed is a scenario ready to meet a move.
type armed struct {
	// during runs in its own goroutine from the moment the move starts;
	// read is when the mover has read the objects it copies (zero while it
	// has not).
	during func(ctx context.Context, read func() time.Time)
	// after runs once the mover has returned.
	after func(ctx context.Context)
	// expectedVM names a VM whose create the scenario itself asks for
	// (a scale-up): it is not the move's doing, and not counted.
	expectedVM string
	// remediation is set when the scenario calls for one remediation of
	// the Machine it names, after the move, in the target: one Machine
	// and its VM replaced is the health check doing its job, not counted;
	// a remediation in the source, or a second one, is counted.
	remediation string
	// settling runs while the moved fleet settles in the target, until
	// its context ends.
	settling func(ctx context.Context)
}

// slowCall bounds how long a held cloud call waits for the mover to have
// read the objects: a slow call, not a stuck one.
const slowCall = 20 * time.Second

func allScenarios() []scenario {
	return []scenario{
		{id: "a", title: "baseline", setup: "Well-behaved providers, nothing in flight: the fleet has settled (no controller wrote to it for 10 s) when the move starts.",
			arm: func(context.Context, *lab, *fleet.Fleet, *eventLog) (*armed, error) { return &armed{}, nil }},
		{id: "b", title: "slow worker", setup: "The first cluster's MachinePool is scaled from 1 to 2 just before the move; the loop provider's reconcile that creates the new instance's VM is held in the cloud call when the move starts, and completes (then records the instance on the source LoopMachinePool) once the mover has read the objects it copies (at most " + slowCall.String() + " later). Its Node joins the workload cluster then.",
			arm: armSlowWorker},
		{id: "c", title: "source ignores pause", setup: "The source's loop provider ignores pause (Switches.IgnorePause) from before the move until it ends.",
			arm: armIgnorePause(func(l *lab) *loopprovider.Switches { return l.env.Source.CAPI.LoopSwitches() })},
		{id: "d", title: "target ignores pause", setup: "The target's loop provider ignores pause from before the move until it ends.",
			arm: armIgnorePause(func(l *lab) *loopprovider.Switches { return l.env.Target.CAPI.LoopSwitches() })},
		{id: "e", title: "node turns unhealthy", setup: "As the move starts, a worker Node's Ready condition turns Unknown in the workload cluster, its last transition set so that the MachineHealthCheck's 300 s timeout runs out 15 s into the move; it stays Unknown. The right outcome is one remediation, in the target, after the move: that Machine and its VM replaced once (the replacement's Node joins when its VM exists). Those are not counted; anything more is.",
			arm: armUnhealthyNode},
		{id: "f", title: "delete path ignores the move", setup: "A case from a provider's tracker, [tinkerbell/cluster-api-provider-tinkerbell#460](https://github.com/tinkerbell/cluster-api-provider-tinkerbell/pull/460) (\"Improve pause handling implementation on the controllers\"): since clusterctl deletes each source object before removing its finalizers (Cluster API v1.9.5, kubernetes-sigs/cluster-api#11812), the Tinkerbell provider, which did not check pause on that path, took the move's deletion of its TinkerbellMachines for a real one and powered the machines off. Here the source's loop provider does the same from before the move until it ends (`Switches.SetDeleteIgnoresMove`: its delete path ignores pause and `delete-for-move`; its normal path still respects pause). Whether it acts depends, as for the reporters, on its reconcile reaching the object between the mover's delete and its finalizer removal. A powered-off VM's Node turns Ready=Unknown, as its kubelet stops. Not reproduced: Tinkerbell's Hardware, BMC jobs and PXE boot.",
			arm: armDeleteIgnoresMove},
		{id: "g", title: "host status lost", setup: "A case from Metal3: [metal3-io/baremetal-operator#431](https://github.com/metal3-io/baremetal-operator/issues/431) (\"BaremetalHost critical states stored in status\") and [kubernetes-sigs/cluster-api#2370](https://github.com/kubernetes-sigs/cluster-api/issues/2370) (\"Clusterctl: Object status lost during move\"): a BareMetalHost keeps in its status alone what its disk holds and for whom, clusterctl move creates copies without status, and a host that arrives without it goes through provisioning again, its disk wiped under the running node. Here the fleet's worker has a BareMetalHost (package `test/hostprovider`: its CRD labelled `clusterctl.cluster.x-k8s.io/move` so that both movers take every host, its controller running with the loop provider's in both clusters) consumed by its LoopMachine and provisioned in the source before the move; the controller provisions a host whose status does not say it holds its image for its consumer's UID, and leaves the others alone. It does not check Cluster pause, as Metal3's does not. The operator runs twice: as installed (`spec.objectStatusPolicy: Rebuild`, as clusterctl) and with `spec.objectStatusPolicy: Carry`, which writes each copy's status from the source with the UIDs of moved objects rewritten to their copies'. Not reproduced: Metal3's own answer, the `baremetalhost.metal3.io/status` annotation its controller restores a status from; Ironic, BMCs and inspection.",
			arm:    func(context.Context, *lab, *fleet.Fleet, *eventLog) (*armed, error) { return &armed{}, nil },
			hosts:  true,
			movers: []string{moverClusterctl, moverOperator, moverOperatorCarry}},
		{id: "h", title: "baseline, CAPD in-memory", setup: "Scenario a on a provider nobody here wrote: the fleet is one classic workload cluster of Cluster API's own development provider (CAPD v1.14.2) with its in-memory backend, created as a user creates it (a Cluster, a DevCluster, a KubeadmControlPlane of one and a MachineDeployment of one worker, as upstream's in-memory templates hold them; package `test/devfleet`) and provisioned by the source's controllers, its VMs in the in-memory cloud both clusters' CAPD share (package `test/inmemorycloud`, which records every VM created and deleted). No fault is injected: the loop provider stays where only it can inject them.",
			arm:  func(context.Context, *lab, *fleet.Fleet, *eventLog) (*armed, error) { return &armed{}, nil },
			capd: true},
		drillScenario(),
	}
}

// armIgnorePause turns IgnorePause on in one cluster's loop provider for
// the move.
func armIgnorePause(switches func(*lab) *loopprovider.Switches) func(context.Context, *lab, *fleet.Fleet, *eventLog) (*armed, error) {
	return func(_ context.Context, l *lab, _ *fleet.Fleet, log *eventLog) (*armed, error) {
		s := switches(l)
		s.SetIgnorePause(true)
		log.add("the loop provider ignores pause")
		return &armed{after: func(context.Context) {
			s.SetIgnorePause(false)
			log.add("the loop provider honours pause again")
		}}, nil
	}
}

// armSlowWorker scales the first cluster's MachinePool up with the new
// instance's VM create held in the cloud.
func armSlowWorker(ctx context.Context, l *lab, f *fleet.Fleet, log *eventLog) (*armed, error) {
	wc := f.Clusters[0]
	name := wc.Name + "-mp-0"
	instance := name + "-1"
	vm := wc.Namespace + "/" + instance
	hold := l.env.Cloud.Hold(func(c cloud.Call) bool { return c.Type == cloud.Created && c.VMName == vm })
	mp := &clusterv1.MachinePool{}
	if err := l.env.Source.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: name}, mp); err != nil {
		hold.Release()
		return nil, fmt.Errorf("reading MachinePool %s: %w", name, err)
	}
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Replicas = ptr.To[int32](2)
	if err := l.env.Source.Client.Patch(ctx, mp, patch); err != nil {
		hold.Release()
		return nil, fmt.Errorf("scaling MachinePool %s up: %w", name, err)
	}
	log.add("MachinePool %s scaled to 2", name)
	select {
	case <-hold.Arrived():
		log.add("the loop provider's create of VM %s is held in the cloud", vm)
	case <-time.After(2 * time.Minute):
		hold.Release()
		return nil, fmt.Errorf("the create of VM %s never reached the cloud", vm)
	}
	release := func(why string) {
		hold.Release()
		log.add("the held create of VM %s is released (%s)", vm, why)
	}
	return &armed{
		during: func(ctx context.Context, read func() time.Time) {
			deadline := time.Now().Add(slowCall)
			for read().IsZero() && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			why := "the mover has read the objects"
			if read().IsZero() {
				why = "after " + slowCall.String() + ", before the mover read the objects"
			}
			release(why)
			if err := joinNode(ctx, l.env.Workload, vm, instance); err != nil {
				log.add("registering the Node of %s: %v", instance, err)
			}
		},
		after:      func(context.Context) { hold.Release() },
		expectedVM: vm,
	}, nil
}

// joinNode registers the Node of a new pool instance, as its kubelet would.
func joinNode(ctx context.Context, w *workload.Server, vm, node string) error {
	return w.AddNode(ctx, workload.Node{Name: node, ProviderID: loopprovider.ProviderIDPrefix + vm, InternalIP: "127.101.250.250",
		Info: corev1.NodeSystemInfo{KubeletVersion: "v1.34.2", OperatingSystem: "linux", Architecture: "amd64"}})
}

// armUnhealthyNode prepares a worker Node to turn Unknown as the move
// starts.
func armUnhealthyNode(ctx context.Context, l *lab, f *fleet.Fleet, log *eventLog) (*armed, error) {
	var worker string
	for _, m := range f.Clusters[0].Machines {
		if strings.Contains(m, "-md-0-") {
			worker = m
			break
		}
	}
	if worker == "" {
		return nil, fmt.Errorf("cluster %s has no worker Machine", f.Clusters[0].Name)
	}
	machine := &clusterv1.Machine{}
	if err := l.env.Source.Client.Get(ctx, client.ObjectKey{Namespace: f.Clusters[0].Namespace, Name: worker}, machine); err != nil {
		return nil, err
	}
	node := machine.Status.NodeRef.Name
	return &armed{
		remediation: worker,
		settling:    func(ctx context.Context) { joinNewMachines(ctx, l, f, log) },
		during: func(ctx context.Context, _ func() time.Time) {
			since := time.Now().Add(15*time.Second - 300*time.Second)
			if err := setNodeReady(ctx, l.env.Workload, node, corev1.ConditionUnknown, since); err != nil {
				log.add("turning Node %s Unknown: %v", node, err)
				return
			}
			log.add("Node %s (Machine %s) is Ready=Unknown, as of %s: unhealthy for the MachineHealthCheck from %s", node, worker,
				since.Format("15:04:05"), since.Add(300*time.Second).Format("15:04:05.000"))
		},
	}, nil
}

func setNodeReady(ctx context.Context, w *workload.Server, name string, status corev1.ConditionStatus, since time.Time) error {
	node := &corev1.Node{}
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	for i, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			node.Status.Conditions[i].Status = status
			node.Status.Conditions[i].Reason = "NodeStatusUnknown"
			node.Status.Conditions[i].LastTransitionTime = metav1.NewTime(since)
		}
	}
	return w.Client.Status().Update(ctx, node)
}

// readStep is the step at which a mover has read what it copies: clusterctl
// reads everything in its discovery, before it pauses; the operator reads
// each object as it copies it, after the controllers have stopped.
func readStep(m string) string {
	if isOperator(m) {
		return "Copying"
	}
	return mover.ClusterctlCreating
}

// copiedStep is the step at which a mover has copied and deleted every
// object: clusterctl then unpauses the target, the operator starts the
// target's controllers. What the controllers write after it is the
// target's taking over.
func copiedStep(m string) string {
	if isOperator(m) {
		return "RestoringTarget"
	}
	return mover.ClusterctlResuming
}

// joinNewMachines registers a Node for every LoopMachine of the fleet in
// the target whose VM exists and has none yet, as a new machine's kubelet
// would, until ctx ends.
func joinNewMachines(ctx context.Context, l *lab, f *fleet.Fleet, log *eventLog) {
	joined := map[string]bool{}
	for ctx.Err() == nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(loopprovider.GroupVersion.WithKind(loopprovider.MachineKind + "List"))
		if err := l.env.Target.Client.List(ctx, list, client.InNamespace(f.Clusters[0].Namespace)); err == nil {
			for _, lm := range list.Items {
				id, _, _ := unstructured.NestedString(lm.Object, "spec", "providerID")
				if id == "" || joined[lm.GetName()] {
					continue
				}
				node := &corev1.Node{}
				if err := l.env.Workload.Client.Get(ctx, client.ObjectKey{Name: lm.GetName()}, node); err == nil {
					joined[lm.GetName()] = true
					continue
				}
				vm := strings.TrimPrefix(id, loopprovider.ProviderIDPrefix)
				if err := joinNode(ctx, l.env.Workload, vm, lm.GetName()); err == nil {
					joined[lm.GetName()] = true
					log.add("the Node of new Machine %s joins", lm.GetName())
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
