package main

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The report in docs reads as a report: each run's sequence and its
// differing copies are cut to their first lines, its late writes counted
// by controller; the details file holds every line.
const (
	// maxSequence bounds the lines of one run's sequence in the report.
	maxSequence = 8
	// maxDiff bounds the lines of the one differing copy shown per run.
	maxDiff = 12
	// lateWritePrefix marks a late write in a run's sequence.
	lateWritePrefix = "late write: "
)

// reportForm is how much of each run a report shows.
type reportForm struct {
	full bool
	// details names the file with every line, in the short form.
	details string
}

// writeReport writes the method, the table and, for every run with a
// non-zero figure, what happened.
func writeReport(path string, results []result, scenarios []scenario, took time.Duration, form reportForm) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# What a move disturbs: clusterctl move and the operator, side by side\n\n")
	fmt.Fprintf(&b, "Written by `make safety` (`test/safety`) on %s, %d CPUs, in %s. Do not edit by hand: run it again.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), took.Round(time.Second))
	b.WriteString(method)
	b.WriteString("\n## Scenarios\n\n")
	for _, s := range scenarios {
		fmt.Fprintf(&b, "- **%s. %s**: %s\n", s.id, s.title, s.setup)
	}
	writeTable(&b, results, scenarios)
	b.WriteString("\n## What happened where a figure is not zero\n\n")
	b.WriteString("Each run's own steps, the cloud's events for the fleet, the Machines created or deleted, the writes the controllers made after the mover had read the objects, and how each differing copy differs (`-` the original's last state in the source, `+` the copy as the mover created it). Times are UTC.\n")
	if !form.full {
		fmt.Fprintf(&b, "Each run shows its first %d steps, its late writes counted by controller, and the first lines of one differing copy; `%s`, written by the same command, holds every step, every late write and every difference.\n", maxSequence, form.details)
	}
	quiet := true
	for _, r := range results {
		if !r.disturbed() {
			continue
		}
		quiet = false
		writeRun(&b, r, title(scenarios, r.scenario), form.full)
	}
	if quiet {
		b.WriteString("\nNone: every figure of every run is zero.\n")
	}
	b.WriteString(notes)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func writeTable(b *strings.Builder, results []result, scenarios []scenario) {
	b.WriteString("\n## Results\n\n")
	b.WriteString("| scenario | mover | move | VMs created | VMs deleted | VMs powered off | Machines created | Machines deleted | hosts provisioned | copies differing | late writes | machine objects made again | Nodes replaced | settles |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		move := r.duration.Round(100 * time.Millisecond).String()
		settles := "yes"
		if !r.settled {
			settles = "no"
		}
		if r.moveErr != nil {
			move, settles = "failed", "-"
		}
		// Each scenario measures what its kind of run can show: a move's
		// copies against their originals, a drill's restored machines.
		copies, late := fmt.Sprint(len(r.copyDiffs)), fmt.Sprint(len(r.lateWrites))
		madeAgain, replaced := "n/a", "n/a"
		if r.drill {
			copies, late = "n/a", "n/a"
			madeAgain, replaced = fmt.Sprint(len(r.madeAgain)), fmt.Sprint(r.nodesReplaced)
		}
		fmt.Fprintf(b, "| %s. %s | %s | %s | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n", r.scenario, title(scenarios, r.scenario), r.mover, move,
			r.vmCreated, r.vmDeleted, r.vmPoweredOff, r.machinesCreated, r.machinesDeleted, r.hostsProvisioned, copies, late, madeAgain, replaced, settles)
	}
}

// writeRun writes what happened in one run: all of it, or its first lines.
func writeRun(b *strings.Builder, r result, title string, full bool) {
	fmt.Fprintf(b, "\n### %s. %s, %s\n\n", r.scenario, title, r.mover)
	if r.moveErr != nil {
		fmt.Fprintf(b, "The move failed: %v\n\n", r.moveErr)
	} else if !r.settled {
		fmt.Fprintf(b, "The fleet did not settle in the target %s.\n\n", r.settleNote)
	}
	sequence := r.sequence
	if !full {
		sequence = shortSequence(r.sequence)
	}
	b.WriteString("```\n" + strings.Join(sequence, "\n") + "\n```\n")
	for i, d := range r.copyDiffs {
		if !full && i > 0 {
			fmt.Fprintf(b, "\n%d more copies differ: %s.\n", len(r.copyDiffs)-1, joinKeys(r.copyDiffs[1:], 5))
			break
		}
		diff := strings.TrimRight(d.Diff, "\n")
		if lines := strings.Split(diff, "\n"); !full && len(lines) > maxDiff {
			diff = strings.Join(lines[:maxDiff], "\n") + fmt.Sprintf("\n  ... %d more lines", len(lines)-maxDiff)
		}
		fmt.Fprintf(b, "\n%s:\n\n```diff\n%s\n```\n", d.Key, diff)
	}
}

// shortSequence keeps a run's first steps and counts its late writes by
// controller, from the first to the last.
func shortSequence(sequence []string) []string {
	var steps, late []string
	for _, line := range sequence {
		if w, ok := strings.CutPrefix(line, lateWritePrefix); ok {
			late = append(late, w)
		} else {
			steps = append(steps, line)
		}
	}
	out := steps
	if len(steps) > maxSequence {
		out = append(slices.Clip(steps[:maxSequence]), fmt.Sprintf("... and %d more steps", len(steps)-maxSequence))
	}
	if len(late) == 0 {
		return out
	}
	// A late write reads "<time> <controller> <verb> <kind> <object> (<code>)".
	by := map[string]int{}
	for _, w := range late {
		if f := strings.Fields(w); len(f) > 1 {
			by[f[1]]++
		}
	}
	var counts []string
	for _, controller := range slices.Sorted(maps.Keys(by)) {
		counts = append(counts, fmt.Sprintf("%s %d", controller, by[controller]))
	}
	first, last := strings.Fields(late[0])[0], strings.Fields(late[len(late)-1])[0]
	return append(out, fmt.Sprintf("late writes: %d (%s), from %s to %s", len(late), strings.Join(counts, ", "), first, last))
}

func joinKeys(diffs []copyDiff, most int) string {
	var keys []string
	for i, d := range diffs {
		if i == most {
			keys = append(keys, fmt.Sprintf("and %d more", len(diffs)-most))
			break
		}
		keys = append(keys, fmt.Sprint(d.Key))
	}
	return strings.Join(keys, ", ")
}

func title(scenarios []scenario, id string) string {
	for _, s := range scenarios {
		if s.id == id {
			return s.title
		}
	}
	return id
}

const method = `## Method

Two local management clusters (real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok processes) run Cluster API v1.14.2's own controllers (core, kubeadm bootstrap, kubeadm control plane) and the tests' loop infrastructure provider, each for as long as its Deployment has a Ready pod, as a provider's pod would; the loop provider's VMs live in a simulated cloud outside both clusters that logs every create, delete and power-off with its caller, and every workload cluster is reached at one shared workload API server holding a Node per machine (package ` + "`test/testenv`" + `, ` + "`test/capiprovider`" + `, ` + "`test/cloud`" + `). Beside them runs a provider nobody here wrote: Cluster API's own development provider, CAPD v1.14.2, installed as ` + "`clusterctl init --infrastructure docker`" + ` installs it (its CRDs, conversion and admission webhooks), its DevCluster and DevMachine controllers running with their in-memory backend, whose VMs, Nodes, etcd members and API servers live in one in-memory cloud both clusters' CAPD share and which records every VM created and deleted (package ` + "`test/inmemorycloud`" + `): scenario h's fleet is CAPD's.

Every run creates a fresh, identical fleet in the source (one classic workload cluster with a control plane Machine, a MachineDeployment of one worker, a MachinePool of one instance and a MachineHealthCheck; see the notes for why no ClusterClass-based one; in scenario g, a BareMetalHost for the worker; in scenario h, CAPD's classic in-memory cluster of one control-plane Machine and a MachineDeployment of one worker, made by the source's controllers), waits until it is Available, its Machines Running, its hosts provisioned, and no controller has written to it for 10 s, sets the scenario up, and moves the fleet's namespaces with one mover, every controller running in both clusters:

- **clusterctl**: clusterctl's Go library v1.14.2 (` + "`clusterctl move --namespace`" + `, one call per namespace, as the CLI takes them), as ` + "`make bench`" + ` uses it: it pauses the Clusters and ClusterClasses and leaves the controllers running.
- **operator**: a MoveOperation handled by the operator, run in-process under its own identity: it scales every provider Deployment to zero in both clusters and waits until their pods (and so their in-flight reconciles) are gone before it reads anything. Its copies start without status (` + "`spec.objectStatusPolicy: Rebuild`" + `, the default), as clusterctl's do.
- **operator, Carry**: the same with ` + "`spec.objectStatusPolicy: Carry`" + `: each copy gets its original's status, the UIDs of moved objects in it rewritten to their copies'. Only in the scenarios where status matters (g): elsewhere it would repeat the operator's row.

The figures of a run:

- **VMs created, deleted, powered off**: the cloud's events for the fleet (for CAPD's fleet, the in-memory cloud's creates and deletes; it has no power state) from the moment the move starts to the end of the settle window, but for what a scenario asks for itself: the slow worker's scale-up (one VM created), and the health check's one remediation of the unhealthy Machine in the target after the move (one Machine and its VM replaced). Those stay in the sequence, marked.
- **Machines created, deleted**: the Machine creates and deletes the controllers of either cluster made in that time (their write logs; a write the API server refused does not count).
- **hosts provisioned**: the cloud's Provision events for the fleet's BareMetalHosts in that time, by either cluster's host controller: each writes an image to a host's disk, wiping the node running there. Only scenario g's fleets have hosts; they were provisioned once in the source before the move.
- **copies differing**: objects whose copy, as the mover created it in the target (the state it was created with, and the managed fields of a later write that changed nothing else, seen before the mover was done, as defined for late writes below: both movers restore the source's managed fields so, right after the create, since the API server keeps the managed fields a request sets only when it changes nothing else), differs from the last state its original had in the source before the mover began deleting it (both clusters watched throughout). Left out: the status (the target's controllers compute it; neither mover carries it, but for the operator's ClusterClasses, and for every copy of the operator with ` + "`spec.objectStatusPolicy: Carry`" + `), the finalizers (a mover removes them to delete the original), the pause (` + "`spec.paused`" + `, the ` + "`cluster.x-k8s.io/paused`" + ` annotation), ` + "`clusterctl.cluster.x-k8s.io/delete-for-move`" + ` and the operator's ` + "`move.cluster.x-k8s.io/`" + ` bookkeeping.
- **late writes**: the controllers' accepted writes to the fleet (Events aside), in either cluster, after the mover had read the objects it copies (clusterctl: its "Creating objects in the target cluster" milestone, after discovery; the operator: its Copying phase) and before it had copied and deleted them all (clusterctl: "Resuming the target ClusterClasses", just before it unpauses the target; the operator: RestoringTarget, when it starts the target's controllers). Each is a change the copy may not carry, or a controller acting on an object while it is being moved.
- **Scenario i, the disaster drill**, is a backup and a restore, not a move: its fleet runs in a management cluster of its own (the same controllers on the same clouds) that each mover backs up, which is then lost, and which each mover restores into the target (see the scenario). Its figures count from the backup's start to the end of the settle window; its move column is the backup's time plus the restore's; copies differing and late writes are not measured there (n/a). Two figures are its alone (n/a elsewhere): **machine objects made again**, the creates and deletes the target's controllers made of a machine's objects (infrastructure machines, KubeadmConfigs, bootstrap data Secrets) after the restore, and **Nodes replaced**, the workload Nodes of the fleet's Machines whose UID after the restore is not the one before the backup.
- **settles**: within 4 minutes of the move, every Cluster is Available in the target, every Machine and MachinePool Running with its status computed for its generation, every BareMetalHost's status says it holds its image for its consumer's copy, and every Cluster stays Available through the settle window.
`

const notes = `
## Notes

- **No ClusterClass-based cluster in these fleets.** With the controllers live, clusterctl's create of a ClusterClass-based Cluster in the target was refused by the Cluster admission webhook on every retry until clusterctl gave up ("Cluster ... can't be defaulted. ClusterClass ... can not be retrieved: client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline", and the same from the validating webhook). clusterctl creates the ClusterClass copy paused and without status, so the webhook polls it for two seconds on every request, waiting for a reconcile that cannot come while it is paused; why its reads then run out of rate in this harness is not established. The operator copies a ClusterClass's status with its generations mapped, and moves ClusterClass-based clusters (the takeover test in ` + "`test/livecontrollers`" + ` moves all three shapes). A comparison needs a fleet both tools move, so these fleets are classic.
- **Scenario f, the case behind it and the cases not taken.** f follows [tinkerbell/cluster-api-provider-tinkerbell#460](https://github.com/tinkerbell/cluster-api-provider-tinkerbell/pull/460): Cluster API v1.9.5 made clusterctl delete each source object before removing its finalizers ([kubernetes-sigs/cluster-api#11812](https://github.com/kubernetes-sigs/cluster-api/issues/11812), fixed by #11814), and from then on the Tinkerbell provider, whose delete path did not check pause, saw the move's deletion of each TinkerbellMachine and started its power-off job; [kubernetes-sigs/cluster-api-provider-vsphere#2510](https://github.com/kubernetes-sigs/cluster-api-provider-vsphere/issues/2510) noted, in an audit of CAPV's pause handling, that its VSphereMachine guarded only its normal path with pause, and #783 there is the 2020 report of a control plane VM powered off during a move. The loop provider's ` + "`Switches.SetDeleteIgnoresMove`" + ` is that delete path: it reconciles a deleted LoopMachine or LoopMachinePool however paused, ignores ` + "`delete-for-move`" + `, and powers off and deletes its VMs. clusterctl v1.14.2 annotates, deletes, then removes the finalizers of each object; the provider's reconcile reaches the object in between, as Tinkerbell's did. What follows in the target is the provider's ordinary behaviour: a LoopMachinePool copy whose instances are gone creates them again (a pool's provider replaces missing instances), and a LoopMachine copy reports its VM not found and leaves the Machine's replacement to its owner. The operator deletes with every provider scaled to zero in the source, and drops the finalizers in the same phase; the source's loop provider starts again only after Deleting (right after the target's providers, in RestoringTarget), when the objects it would act on are gone. Not reproduced: Tinkerbell's own objects (Hardware, BMC jobs, workflows), PXE and power management; the harness turns a powered-off VM's Node Ready=Unknown itself, as its stopped kubelet would (the MachineHealthCheck's 300 s timeout then runs past the settle window). Considered and not taken: [outscale/cluster-api-provider-outscale#457](https://github.com/outscale/cluster-api-provider-outscale/issues/457) (after ` + "`clusterctl move`" + ` the target's provider created new instances beside the moved ones; fixed by #484, "vm were recreated after a clusterctl move"): a controller acting after the move on what the copy holds, which both movers' copies would meet alike, not a controller running during it; [siderolabs/sidero#977](https://github.com/siderolabs/sidero/issues/977) (after the move the bootstrap cluster's controllers found Servers whose Machines had left, cleaned them, and the machines PXE-booted from the bootstrap cluster and were wiped): the Servers stayed behind in the bootstrap cluster, as the report says, and the harness has no kind that does; the operator would not prevent it either, since it scales the source's controllers back up when the move is done.
- **clusterctl's copies keep the source's owner UIDs in their managed fields.** clusterctl v1.14.2 creates each copy with its owner references pointing at the target's owners, then gives it the source's managed fields as they were (` + "`patchTopologyManagedFields`" + `), so a server-side-apply entry for an owner reference (` + "`f:metadata.f:ownerReferences.k:{\"uid\":...}`" + `) still names the source owner's UID, which no reference of the copy has: the Machines of a MachineSet or a KubeadmControlPlane and the MachineSets of a MachineDeployment, counted among clusterctl's copies differing (shown as ` + "`\"owner\":\"?\"`" + `). The operator rewrites those UIDs to the target's (` + "`internal/move/managedfields.go`" + `).
- **A finding for both movers**, seen in the takeover test: neither carries a KubeadmConfig's status, and Cluster API v1.14's KubeadmConfig controller recognises a moved config only when a Machine owns it (it reads ` + "`spec.bootstrap.dataSecretName`" + ` from the owner, which a MachinePool keeps under ` + "`spec.template`" + `), so in the target it generates a MachinePool's bootstrap data again, with a new bootstrap token, and rewrites the bootstrap Secret. Nothing is created or deleted, so no figure above counts it; an infrastructure provider that rolls its instances when their bootstrap data changes would replace the pool's machines. Carrying the KubeadmConfig status across, as the operator already does for ClusterClasses, would avoid it.
- **Scenario h, a provider nobody here wrote.** CAPD's in-memory backend keeps its cloud (VMs, Nodes, etcd members, API servers) in the provider's process upstream: stopped, as the operator's move stops it, it would forget every VM and create them all again when it starts, and the target's CAPD would make its own. Here both clusters' CAPD share one in-memory cloud that outlives them (` + "`test/inmemorycloud`" + `), as a cloud account is shared; the target's CAPD finds each VM under the same resource group (the Cluster's namespace/name) and control-plane endpoint. Every DevCluster carries an annotation: CAPD v1.14.2's in-memory backend panics on a DevCluster created with none (docs/before-you-move.md). The fleet is classic for the reason above.
- **The loop provider adopts a VM by name** when the object that should record its ID does not: where a real provider knows its VM only by the ID it wrote on the object, a copy missing that ID (a "copies differing" figure) means a second VM.
`
