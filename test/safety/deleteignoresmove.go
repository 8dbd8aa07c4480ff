package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// Scenario f is a case from a provider's issue tracker:
// tinkerbell/cluster-api-provider-tinkerbell#460, "Improve pause handling
// implementation on the controllers"
// (https://github.com/tinkerbell/cluster-api-provider-tinkerbell/pull/460).
// Since Cluster API v1.9.5 (kubernetes-sigs/cluster-api#11814, the fix of
// #11812) clusterctl move deletes each source object before it removes
// its finalizers, so a provider sees the object with a deletion timestamp
// for a moment; the Tinkerbell provider, which did not check pause there,
// took that for a real deletion and started the power-off jobs of the
// machines being moved. kubernetes-sigs/cluster-api-provider-vsphere#2510,
// an audit of CAPV's pause handling, noted the same shape there
// (VSphereMachine guarded only its normal reconcile with pause), and #783
// there is the older report of a control plane VM powered off during a
// move.
//
// What is reproduced: the source's loop provider guards only its normal
// path with pause and ignores clusterctl's delete-for-move mark
// (loopprovider.Switches.SetDeleteIgnoresMove), so a LoopMachine or
// LoopMachinePool deleted in the source while its finalizer is still on
// has its VMs powered off and deleted, as a real deletion would; the mover
// and Cluster API v1.14.2's own controllers are real, and whether the
// provider wins the race against clusterctl's finalizer removal is left
// to the timing of the run, as it was for the reporters. A powered-off
// machine's kubelet stops, so the harness turns the Node of every VM the
// cloud powered off Ready=Unknown in the workload cluster (the shared
// workload API server has no kubelets to do it). What is not: Tinkerbell's
// own objects (Hardware, BMC jobs, workflows), bare-metal PXE and power
// management, and its normal path's pause handling (scenario c covers a
// provider that ignores pause there).
func armDeleteIgnoresMove(_ context.Context, l *lab, f *fleet.Fleet, log *eventLog) (*armed, error) {
	s := l.env.Source.CAPI.LoopSwitches()
	from := l.env.Cloud.LastSeq()
	s.SetDeleteIgnoresMove(true)
	log.add("the source's loop provider deletes the VMs of any deleted LoopMachine or LoopMachinePool, paused or marked delete-for-move")
	return &armed{
		after: func(context.Context) {
			s.SetDeleteIgnoresMove(false)
			log.add("the source's loop provider honours pause and delete-for-move again")
		},
		settling: func(ctx context.Context) { stopNodesOfPoweredOffVMs(ctx, l, f, from, log) },
	}, nil
}

// stopNodesOfPoweredOffVMs turns the Node of every fleet VM the cloud
// powered off after seq Ready=Unknown as of the power-off, as the node
// lifecycle controller would once its kubelet stopped posting status,
// until ctx ends.
func stopNodesOfPoweredOffVMs(ctx context.Context, l *lab, f *fleet.Fleet, seq int64, log *eventLog) {
	stopped := map[string]bool{}
	inFleet := func(vm string) bool {
		for _, ns := range f.Namespaces {
			if strings.HasPrefix(vm, ns+"/") {
				return true
			}
		}
		return false
	}
	for ctx.Err() == nil {
		for _, e := range l.env.Cloud.EventsSince(seq) {
			if e.Type != cloud.PowerOff || stopped[e.VMID] || !inFleet(e.VMName) {
				continue
			}
			node, err := nodeOfVM(ctx, l, e.VMName)
			if err != nil {
				log.add("finding the Node of VM %s: %v", e.VMName, err)
				stopped[e.VMID] = true
				continue
			}
			if node == "" {
				stopped[e.VMID] = true // Never joined: nothing to stop.
				continue
			}
			if err := setNodeReady(ctx, l.env.Workload, node, corev1.ConditionUnknown, e.Time); err != nil {
				continue // Retried on the next pass.
			}
			stopped[e.VMID] = true
			log.add("Node %s is Ready=Unknown as of %s: its VM %s (%s) is powered off", node, e.Time.Format("15:04:05.000"), e.VMName, e.VMID)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// nodeOfVM returns the name of the workload Node whose providerID names
// the VM, or "" if none has joined.
func nodeOfVM(ctx context.Context, l *lab, vm string) (string, error) {
	nodes := &corev1.NodeList{}
	if err := l.env.Workload.Client.List(ctx, nodes); err != nil {
		return "", fmt.Errorf("listing the workload Nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID == loopprovider.ProviderIDPrefix+vm {
			return n.Name, nil
		}
	}
	return "", nil
}
