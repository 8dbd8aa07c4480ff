// Command demo is `make demo`: the pivot most Cluster API users make. A
// bootstrap cluster manages a fleet that includes the management cluster it
// created (the Cluster "mgmt/mgmt-0", whose API server, kubeconfig and Nodes
// are the second local cluster's); move-operator, running as a real process
// with every Cluster API controller live in both clusters, moves the whole
// fleet into that cluster, which then manages itself. The demo shows the
// move live, prints what changed, and ends with the takeover check: the new
// management cluster's controllers reconciled the moved fleet and no VM,
// Machine or Node was created or deleted. With BACK=1 the operator installed
// in the self-hosted cluster then moves everything back to the bootstrap
// cluster, as before deleting the self-hosted cluster, with the same checks.
//
// It starts two local management clusters (package testenv: real etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok processes
// with Cluster API installed as clusterctl init leaves it, and its
// controllers, the loop provider running against a simulated cloud and
// CAPD's in-memory provider against its in-memory cloud), creates a fleet in
// the source (packages fleet and devfleet) and waits until the source's
// controllers have settled it, installs the MoveOperation CRD, builds the
// image and runs the manager binary out of it as installed (package
// installed: the Deployment's args and env, the ServiceAccount and RBAC of
// dist/install.yaml), makes the target credential as `manager
// target-access` does, and applies config/samples/demo_moveoperation.yaml. It
// exits 0 only when each MoveOperation reached Done, the target holds exactly
// what the source held before, and the target's controllers took the fleet
// over without creating or deleting a VM, a Machine or a Node of the
// self-hosted cluster (package takeover).
//
// The clusters are processes of this program: they stop when it stops. With
// KEEP=1 it stays in the foreground after the move, printing kubectl commands
// for both clusters, until interrupted.
//
// It never touches anything outside the directories it creates under the
// system's temporary directory and bin/image.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/targetaccess"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/devfleet"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

const (
	samplePath = "config/samples/demo_moveoperation.yaml"
	// secretName must match spec.target.kubeconfigSecretRef.name in the sample.
	secretName = "target-kubeconfig"
	// moveTimeout bounds the move itself; it takes seconds.
	moveTimeout = 5 * time.Minute
	// settleBound bounds how long the live controllers may take to settle
	// the fresh fleet in the source, and the moved one in the target.
	settleBound = 5 * time.Minute
	// quietBeforeMove is how long the source's controllers must have left
	// the fleet alone before the move: nothing in flight.
	quietBeforeMove = 10 * time.Second
	// takeoverWindow is how long the moved fleet is watched in the target.
	takeoverWindow = 30 * time.Second
)

// The demo fleet: the self-hosted management cluster (classic, in
// namespace mgmt), six workload clusters of the loop provider, two of each
// shape (classic, ClusterClass in the cluster's namespace, ClusterClass in
// another namespace), in two team namespaces, and two clusters of Cluster
// API's own in-memory provider (CAPD: one classic, one from upstream's
// ClusterClass template) in namespace capd, provisioned by the bootstrap
// cluster's controllers. The sample names the same namespaces.
var (
	devFleetOptions   = devfleet.Options{Namespace: "capd", Prefix: "dev", Clusters: 2}
	selfHostedOptions = fleet.Options{
		Clusters:   1,
		Workers:    ptr.To(1),
		Namespaces: []string{"mgmt"},
		Name:       "mgmt",
	}
	fleetOptions = fleet.Options{
		Clusters:   6,
		Workers:    ptr.To(1),
		Namespaces: []string{"team-a", "team-b"},
		Name:       "workload",
	}
)

func main() {
	os.Exit(run())
}

// demo holds what the run started, for the summary and for cleanup.
type demo struct {
	root    string
	workDir string
	env     *testenv.Env
	// binary is the manager's binary, out of the image.
	binary string
	// legs are the moves started so far: the pivot, then the move back.
	legs  []*leg
	began time.Time
	// lowest holds, per controller, the fewest replicas seen during the move.
	lowest map[string]int32
}

// leg is one move of the demo: from one management cluster to the other,
// by the operator installed in the first.
type leg struct {
	name     string
	from, to *testenv.Management
	// operator is the manager as installed (test/installed) in from, nil
	// until started.
	operator *installed.Running
	opLog    string
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{began: time.Now()}
	keep, back := os.Getenv("KEEP") != "", os.Getenv("BACK") != ""

	say("move-operator demo: a bootstrap cluster's fleet pivots into the management cluster it created.")
	say("The first run builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from the Go")
	say("module proxy, and compiles the operator and this demo: about 15 minutes on 2 cores the first time,")
	say("cached afterwards (binaries under ~/.cache/move-operator). A repeat run takes under 2 minutes.")

	err := d.run(ctx, keep, back)
	code := 0
	if err != nil {
		code = 1
		fmt.Fprintf(os.Stderr, "\nDEMO FAILED: %v\n", err)
		d.printLogLocations(os.Stderr)
	}
	if keep && d.env != nil && ctx.Err() == nil {
		d.printKeepInstructions()
		<-ctx.Done()
		say("interrupted: stopping the operator and both clusters")
	}
	d.cleanup(code == 0)
	if keep && code == 0 {
		say("both clusters stopped")
	}
	return code
}

func (d *demo) run(ctx context.Context, keep, back bool) error {
	if err := d.setUp(ctx); err != nil {
		return err
	}
	f, err := d.createFleet(ctx)
	if err != nil {
		return err
	}
	nodes, err := d.selfHostedNodes(ctx)
	if err != nil {
		return err
	}
	legs := []*leg{{name: "pivot", from: d.env.Source, to: d.env.Target}}
	if back {
		legs = append(legs, &leg{name: "back", from: d.env.Target, to: d.env.Source})
	}
	for _, l := range legs {
		if err := d.move(ctx, l, f, nodes, keep || l != legs[len(legs)-1]); err != nil {
			return err
		}
	}
	if !back {
		say("(BACK=1 make demo moves everything back to the bootstrap cluster afterwards.)")
	}
	return nil
}

// move makes one leg of the demo and checks it.
func (d *demo) move(ctx context.Context, l *leg, f *fleet.Fleet, nodes map[string]string, quiet bool) error {
	d.legs = append(d.legs, l)
	step(fmt.Sprintf("%s: moving the fleet from %s to %s", l.name, l.from.Name, l.to.Name))
	c, err := clientFor(l.from)
	if err != nil {
		return err
	}
	before, err := take(ctx, l.from.Client, f.Namespaces)
	if err != nil {
		return err
	}
	replicasBefore, err := d.replicas(ctx)
	if err != nil {
		return err
	}
	mark, mo, err := d.startMove(ctx, l, c)
	if err != nil {
		return err
	}

	step("Watching the move (as kubectl get mo -w would show it)")
	done, err := d.watch(ctx, l, c, mo)
	if err != nil {
		return err
	}

	after, err := take(ctx, l.to.Client, f.Namespaces)
	if err != nil {
		return err
	}
	sourceAfter, err := take(ctx, l.from.Client, f.Namespaces)
	if err != nil {
		return err
	}
	replicasAfter, err := d.replicas(ctx)
	if err != nil {
		return err
	}
	step("Summary")
	printKinds(l, before, sourceAfter, after, f.Namespaces, done.Status.Phase == movev1alpha1.PhaseDone)
	printReplicas(replicasBefore, d.lowest, replicasAfter)
	printPhases(done)

	if err := checkMove(done, f.Namespaces, before, sourceAfter, after, replicasBefore, replicasAfter); err != nil {
		return err
	}
	headline, err := d.takeover(ctx, l, f, mark, done, nodes)
	if err != nil {
		return err
	}
	d.saySuccess(done, len(inNamespaces(before, f.Namespaces).Objects), quiet)
	say("\n%s", headline)
	return nil
}

// setUp makes the demo's work directory and logs, builds the Kubernetes
// binaries if they are not cached, and starts the two management clusters
// while it builds the operator.
func (d *demo) setUp(ctx context.Context) error {
	var err error
	if d.root, err = testenv.RepositoryRoot("make demo"); err != nil {
		return err
	}
	if d.workDir, err = os.MkdirTemp("", "move-operator-demo-"); err != nil {
		return err
	}
	// The Cluster API webhooks served by this process log through
	// controller-runtime's logger: into the work directory, not the terminal.
	webhookLog, err := os.Create(filepath.Join(d.workDir, "webhooks.log"))
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(webhookLog), zap.Level(zapcore.InfoLevel)))

	step("Kubernetes binaries (built once, then cached)")
	binDir, err := localcluster.BinaryDir(ctx)
	if err != nil {
		return err
	}
	say("  using %s", binDir)

	step("Building the operator's image (make image) while the bootstrap cluster and the management cluster start")
	built := make(chan error, 1)
	go func() { built <- d.buildOperator(ctx) }()
	d.env, err = testenv.Start(ctx, testenv.Options{CAPI: true, Controllers: true, SelfHosted: true, InMemory: true, Names: [2]string{"bootstrap", "mgmt"}, Logf: func(format string, args ...any) {
		say("  "+format, args...)
	}})
	if err != nil {
		return fmt.Errorf("starting the management clusters: %w", err)
	}
	if err := <-built; err != nil {
		return err
	}
	say("  operator built: %s, its binary taken out of the image", d.binary)
	return nil
}

// createFleet creates the fleet in the bootstrap cluster (the source):
// the self-hosted management cluster, whose workload cluster is the
// target, and the others; it waits until the source's controllers have
// reconciled it and left it alone.
func (d *demo) createFleet(ctx context.Context) (*fleet.Fleet, error) {
	step(fmt.Sprintf("Creating a fleet of %d workload clusters in the bootstrap cluster",
		selfHostedOptions.Clusters+fleetOptions.Clusters+devFleetOptions.Clusters))
	selfOpts, opts := selfHostedOptions, fleetOptions
	selfOpts.Live = &fleet.Live{Cloud: d.env.Cloud, Workload: d.env.SelfHosted, ManagementCluster: d.env.Source.Name}
	opts.Live = &fleet.Live{Cloud: d.env.Cloud, Workload: d.env.Workload, ManagementCluster: d.env.Source.Name}
	self, err := fleet.Create(ctx, d.env.Source.Client, selfOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the self-hosted cluster: %w", err)
	}
	others, err := fleet.Create(ctx, d.env.Source.Client, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the fleet: %w", err)
	}
	dev, err := d.createDevFleet(ctx)
	if err != nil {
		return nil, err
	}
	f := fleet.Join(self, others, dev)
	host, port := d.env.SelfHosted.Endpoint()
	for _, c := range f.Clusters {
		class := ""
		if c.ClassRef != nil {
			class = " (ClusterClass " + c.ClassRef.String() + ")"
		}
		switch c.Namespace {
		case self.Clusters[0].Namespace:
			class = fmt.Sprintf(": the local management cluster %q itself, at %s:%d", d.env.Target.Name, host, port)
		case devFleetOptions.Namespace:
			say("  %-8s %-12s %s%s, CAPD in-memory: its controllers make the Machines", c.Namespace, c.Name, c.Shape, class)
			continue
		}
		say("  %-8s %-12s %s%s, %d Machines", c.Namespace, c.Name, c.Shape, class, len(c.Machines))
	}
	say("  %d objects in %s", f.Total(), f.Duration.Round(time.Millisecond))
	ours := takeover.InFleet(f)
	if err := takeover.Poll(ctx, settleBound, func() error {
		if err := takeover.Available(ctx, d.env.Source, f); err != nil {
			return err
		}
		if err := takeover.Running(ctx, d.env.Source, f); err != nil {
			return err
		}
		return takeover.Quiet(d.env.Source, ours, quietBeforeMove)
	}); err != nil {
		return nil, fmt.Errorf("the fleet did not settle in the bootstrap cluster: %w", err)
	}
	say("  the bootstrap cluster's controllers have reconciled it and left it alone for %s", quietBeforeMove)
	return f, nil
}

// createDevFleet creates the CAPD in-memory clusters as a user would, from
// upstream's templates, in their own namespace.
func (d *demo) createDevFleet(ctx context.Context) (*fleet.Fleet, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devFleetOptions.Namespace}}
	if err := d.env.Source.Client.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	dev, err := devfleet.Create(ctx, d.env.Source.Client, devFleetOptions)
	if err != nil {
		return nil, fmt.Errorf("creating the CAPD in-memory clusters: %w", err)
	}
	return dev, nil
}

// selfHostedNodes are the Nodes of the self-hosted cluster's Machines, in
// the management cluster they stand for: name to UID.
func (d *demo) selfHostedNodes(ctx context.Context) (map[string]string, error) {
	list := &corev1.NodeList{}
	if err := d.env.SelfHosted.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing the self-hosted cluster's Nodes: %w", err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		if strings.Contains(n.Spec.ProviderID, "/"+selfHostedOptions.Namespaces[0]+"/") {
			out[n.Name] = string(n.UID)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the self-hosted cluster has no Node in %s", d.env.Target.Name)
	}
	return out, nil
}

// startMove installs the MoveOperation CRD in the leg's source, starts the
// operator there, and applies the sample MoveOperation. It returns the mark
// taken just before the move starts, from which the takeover counts writes.
func (d *demo) startMove(ctx context.Context, l *leg, c client.Client) (takeover.Mark, *movev1alpha1.MoveOperation, error) {
	step(fmt.Sprintf("Installing the MoveOperation CRD in %s and starting the operator there", l.from.Name))
	if _, err := envtest.InstallCRDs(l.from.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(d.root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return takeover.Mark{}, nil, fmt.Errorf("installing the MoveOperation CRD: %w", err)
	}
	if err := d.startOperator(ctx, l); err != nil {
		return takeover.Mark{}, nil, err
	}
	say("  its log: %s", l.opLog)

	mark := takeover.MarkNow(d.env)
	step("Creating the target kubeconfig Secret and applying " + samplePath)
	mo, err := d.applySample(ctx, l, c)
	return mark, mo, err
}

// checkMove fails unless the move reached Done with the target holding
// exactly what the source held, nothing of it left in the source but what
// global objects own, and every controller back at its replica count.
func checkMove(done *movev1alpha1.MoveOperation, namespaces []string, before, sourceAfter, after *snapshot.Snapshot, replicasBefore, replicasAfter map[string]int32) error {
	if done.Status.Phase != movev1alpha1.PhaseDone {
		printConditions(done)
		return fmt.Errorf("MoveOperation %s/%s ended in phase %s: %s", done.Namespace, done.Name, done.Status.Phase, done.Status.FailureMessage)
	}
	if diff := snapshot.Diff(inNamespaces(before, namespaces), inNamespaces(after, namespaces)); diff != "" {
		return fmt.Errorf("the move reached Done but the target differs from the source before the move (-source +target):\n%s", diff)
	}
	if left := inNamespaces(sourceAfter, namespaces); len(left.Objects) > 0 {
		var orphans []string
		for _, o := range left.Objects {
			if !ownedByGlobal(o) {
				orphans = append(orphans, o.Key().String())
			}
		}
		if len(orphans) > 0 {
			return fmt.Errorf("the move reached Done but the source still holds %s", strings.Join(orphans, ", "))
		}
	}
	for k, n := range replicasBefore {
		if replicasAfter[k] != n {
			return fmt.Errorf("the move reached Done but controller %s has %d replicas, %d before", strings.ReplaceAll(k, "\t", " "), replicasAfter[k], n)
		}
	}
	return nil
}

// saySuccess says what moved and how long it took.
func (d *demo) saySuccess(done *movev1alpha1.MoveOperation, moved int, quiet bool) {
	planned := 0
	if done.Status.Plan != nil {
		planned = int(done.Status.Plan.Objects)
	}
	say("\nSUCCESS: %d objects moved in %s (and %d cluster-scoped ones copied); the target holds exactly what the",
		moved, moveDuration(done), planned-moved)
	say("source held before, every controller is back at its replica count, and the whole demo took %s.",
		time.Since(d.began).Round(time.Second))
	if !quiet {
		say("(KEEP=1 make demo keeps both clusters running afterwards.)")
	}
}

// takeover waits until the target's live controllers have reconciled the
// moved fleet, watches it for takeoverWindow, and returns the one-line
// result: what stopping the controllers for the move is for.
func (d *demo) takeover(ctx context.Context, l *leg, f *fleet.Fleet, mark takeover.Mark, done *movev1alpha1.MoveOperation, nodes map[string]string) (string, error) {
	step(fmt.Sprintf("Watching %s's controllers take the fleet over (%s once reconciled)", l.to.Name, takeoverWindow))
	if err := takeover.Poll(ctx, settleBound, func() error {
		if err := takeover.Available(ctx, l.to, f); err != nil {
			return err
		}
		return takeover.Running(ctx, l.to, f)
	}); err != nil {
		return "", fmt.Errorf("the target's controllers did not reconcile the moved fleet: %w", err)
	}
	reconciled := time.Since(done.Status.CompletionTime.Time).Round(time.Second)
	say("  every Cluster Available, every Machine and MachinePool Running, %s after Done", reconciled)
	for end := time.Now().Add(takeoverWindow); time.Now().Before(end); {
		if err := takeover.Available(ctx, l.to, f); err != nil {
			return "", fmt.Errorf("the moved fleet did not stay Available: %w", err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	churn := takeover.ChurnSince(d.env, mark, takeover.InFleet(f))
	if !churn.None() {
		for _, e := range churn.VMs {
			say("  cloud: %s VM %s by %s", e.Type, e.VMName, e.Caller)
		}
		for _, e := range churn.DevVMs {
			say("  in-memory cloud: %s", e)
		}
		for _, w := range churn.Machines {
			say("  %s", w)
		}
		return "", fmt.Errorf("the move disturbed the fleet: %d VM events, %d Machines created or deleted", len(churn.VMs)+len(churn.DevVMs), len(churn.Machines))
	}
	now, err := d.selfHostedNodes(ctx)
	if err != nil {
		return "", err
	}
	if !maps.Equal(now, nodes) {
		return "", fmt.Errorf("the self-hosted cluster's Nodes changed: %v before, %v now", nodes, now)
	}
	machines := &clusterv1.MachineList{}
	if err := l.to.Client.List(ctx, machines); err != nil {
		return "", err
	}
	return fmt.Sprintf("TAKEOVER: no VM, Machine or Node created or deleted; %s's controllers reconciled the fleet (%d clusters, %d Machines, the self-hosted one and %d CAPD in-memory ones among them) %s after Done",
		l.to.Name, len(f.Clusters), len(machines.Items), devFleetOptions.Clusters, reconciled), nil
}

// buildOperator builds the host platform's image (hack/image, as make
// image does) and takes the manager binary out of it: the demo runs what is
// shipped.
func (d *demo) buildOperator(context.Context) error {
	var err error
	d.binary, err = installed.ManagerBinary()
	return err
}

// startOperator installs the operator's identity in the leg's source as
// dist/install.yaml gives it (its ServiceAccount and RBAC, a token for it)
// and runs the manager with the args and env of that file's Deployment.
func (d *demo) startOperator(ctx context.Context, l *leg) error {
	install, err := installed.Read(d.root)
	if err != nil {
		return err
	}
	identity, err := install.Grant(ctx, l.from.Config, filepath.Join(d.workDir, l.name+"-identity"))
	if err != nil {
		return fmt.Errorf("giving the operator its installed identity: %w", err)
	}
	l.opLog = filepath.Join(d.workDir, l.name+"-manager.log")
	l.operator, err = install.Start(ctx, installed.Process{Binary: d.binary, Identity: identity}, l.opLog)
	if err != nil {
		return err
	}
	args, err := install.Args(installed.Process{Binary: d.binary, Identity: identity, ProbeAddress: l.operator.ProbeAddress})
	if err != nil {
		return err
	}
	say("  KUBECONFIG=%s %s %s", identity.Kubeconfig, d.binary, strings.Join(args, " "))
	say("  as %s, with the RBAC of %s", identity.Username, installed.InstallPath)
	return nil
}

// clientFor is an admin client of m that reads MoveOperations too.
func clientFor(m *testenv.Management) (client.Client, error) {
	s := capiprovider.NewScheme()
	utilruntime.Must(movev1alpha1.AddToScheme(s))
	return client.New(m.Config, client.Options{Scheme: s})
}

func (d *demo) applySample(ctx context.Context, l *leg, c client.Client) (*movev1alpha1.MoveOperation, error) {
	data, err := os.ReadFile(filepath.Join(d.root, samplePath))
	if err != nil {
		return nil, err
	}
	mo := &movev1alpha1.MoveOperation{}
	if err := yaml.UnmarshalStrict(data, mo); err != nil {
		return nil, fmt.Errorf("reading %s: %w", samplePath, err)
	}
	// What `manager target-access` does: the target's side of the access
	// applied there, a token for its ServiceAccount, the Secret written.
	manifest, err := os.ReadFile(filepath.Join(d.root, installed.TargetAccessPath))
	if err != nil {
		return nil, err
	}
	kubeconfig, expires, err := targetaccess.Grant(ctx, l.to.Config, manifest, targetaccess.Options{})
	if err != nil {
		return nil, fmt.Errorf("making the operator's target credential: %w", err)
	}
	if err := targetaccess.WriteSecret(ctx, c, mo.Namespace, secretName, movev1alpha1.DefaultKubeconfigSecretKey, kubeconfig); err != nil {
		return nil, err
	}
	say("  Secret %s/%s: a token of %s's move-operator-target ServiceAccount (%s), valid until %s",
		mo.Namespace, secretName, l.to.Name, installed.TargetAccessPath, expires.Format(time.RFC3339))
	if err := c.Create(ctx, mo); err != nil {
		return nil, fmt.Errorf("creating MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	say("  MoveOperation %s/%s, namespaces %s", mo.Namespace, mo.Name, strings.Join(mo.Spec.Namespaces, ", "))
	return mo, nil
}

// watch prints a line each time the phase or the progress changes, until the
// move has ended (Done or Failed).
func (d *demo) watch(ctx context.Context, l *leg, c client.Client, mo *movev1alpha1.MoveOperation) (*movev1alpha1.MoveOperation, error) {
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	const row = "  %-12s %-16s %-18s %-10s %s\n"
	fmt.Printf(row, "NAME", "PHASE", "TARGET", "PROGRESS", "AGE")
	last := ""
	d.lowest = map[string]int32{}
	polls := 0
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		cur := &movev1alpha1.MoveOperation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(mo), cur); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("the move did not end within %s (last seen: %s)", moveTimeout, last)
			}
			return nil, fmt.Errorf("reading MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
		}
		progress := ""
		if cur.Status.Progress != nil {
			progress = cur.Status.Progress.Summary
		}
		line := string(cur.Status.Phase) + "\t" + progress
		if line != last && cur.Status.Phase != "" {
			age := time.Since(cur.CreationTimestamp.Time).Round(100 * time.Millisecond)
			fmt.Printf(row, cur.Name, cur.Status.Phase, cur.Spec.Target.KubeconfigSecretRef.Name, progress, age)
			last = line
		}
		if p := cur.Status.Phase; p == movev1alpha1.PhaseDone || p == movev1alpha1.PhaseFailed {
			return cur, nil
		}
		// Twice a second, note how far each controller was scaled down.
		if polls++; polls%5 == 0 {
			if now, err := d.replicas(ctx); err == nil {
				for k, n := range now {
					if low, ok := d.lowest[k]; !ok || n < low {
						d.lowest[k] = n
					}
				}
			}
		}
		select {
		case <-l.operator.Exited():
			return cur, fmt.Errorf("the operator exited (%w) in phase %s", l.operator.Err(), cur.Status.Phase)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				printConditions(cur)
				return nil, fmt.Errorf("the move did not end within %s; it is in phase %s", moveTimeout, cur.Status.Phase)
			}
			return nil, ctx.Err()
		case <-ticker.C:
		}
	}
}

// replicas reads the replica count of every provider controller in both clusters.
func (d *demo) replicas(ctx context.Context) (map[string]int32, error) {
	out := map[string]int32{}
	for _, m := range []*testenv.Management{d.env.Source, d.env.Target} {
		list := &appsv1.DeploymentList{}
		if err := m.Client.List(ctx, list, client.HasLabels{capiprovider.ProviderLabel}); err != nil {
			return nil, fmt.Errorf("listing the controllers of %s: %w", m.Name, err)
		}
		for _, dep := range list.Items {
			out[m.Name+"\t"+dep.Namespace+"/"+dep.Name] = ptr.Deref(dep.Spec.Replicas, 1)
		}
	}
	return out, nil
}

func (d *demo) printLogLocations(w io.Writer) {
	for _, l := range d.legs {
		if l.opLog != "" {
			fmt.Fprintf(w, "operator log (%s):%s%s\n", l.name, strings.Repeat(" ", 9-len(l.name)), l.opLog)
		}
	}
	if d.workDir != "" {
		fmt.Fprintf(w, "webhook log:             %s\n", filepath.Join(d.workDir, "webhooks.log"))
	}
	if d.env != nil {
		fmt.Fprintf(w, "cluster process logs:    %s\n", d.env.LogDirs())
	}
}

func (d *demo) printKeepInstructions() {
	src, tgt := d.env.Source.KubeconfigPath, d.env.Target.KubeconfigPath
	step("KEEP=1: both clusters keep running while this program runs")
	say("The clusters are processes of this program (their webhooks are served by it too): they stop")
	say("when it stops, so it stays in the foreground. Look at them from another terminal:")
	say("")
	say("  kubectl --kubeconfig %s get moveoperations -A", src)
	say("  kubectl --kubeconfig %s get mo demo-move -n default -o yaml", src)
	say("  kubectl --kubeconfig %s get clusters,machines -A", src)
	say("  kubectl --kubeconfig %s get clusters,machines,clusterclasses -A", tgt)
	say("  kubectl --kubeconfig %s get deployments -A -l %s", tgt, capiprovider.ProviderLabel)
	say("")
	say("Logs: operator under %s; cluster processes %s", d.workDir, d.env.LogDirs())
	say("Stop everything with Ctrl-C here (or kill -INT %d).", os.Getpid())
}

func (d *demo) cleanup(removeLogs bool) {
	for _, l := range d.legs {
		if l.operator != nil {
			if err := l.operator.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping the operator in %s: %v\n", l.from.Name, err)
			}
		}
	}
	if d.env != nil {
		if err := d.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the clusters: %v\n", err)
		}
		if removeLogs {
			if err := d.env.RemoveLogs(); err != nil {
				fmt.Fprintf(os.Stderr, "%v\n", err)
			}
		}
	}
	if removeLogs && d.workDir != "" {
		_ = os.RemoveAll(d.workDir)
	}
}

// take snapshots a cluster without the marks a move puts on objects while
// it runs.
func take(ctx context.Context, c client.Reader, namespaces []string) (*snapshot.Snapshot, error) {
	s, err := snapshot.Take(ctx, c, snapshot.Options{
		Namespaces:        namespaces,
		IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation},
	})
	if err != nil {
		return nil, fmt.Errorf("taking a snapshot: %w", err)
	}
	return s, nil
}

func inNamespaces(s *snapshot.Snapshot, namespaces []string) *snapshot.Snapshot {
	out := &snapshot.Snapshot{}
	for _, o := range s.Objects {
		for _, ns := range namespaces {
			if o.Namespace == ns {
				out.Objects = append(out.Objects, o)
			}
		}
	}
	return out
}

// ownedByGlobal tells the objects that stay in the source by design: those of
// a cluster-scoped object's hierarchy (copied, never deleted).
func ownedByGlobal(o snapshot.Object) bool {
	for _, owner := range o.Owners {
		if strings.HasPrefix(owner.Kind, "LoopClusterIdentity.") {
			return true
		}
	}
	return false
}

func printKinds(l *leg, before, sourceAfter, targetAfter *snapshot.Snapshot, namespaces []string, moved bool) {
	say("Objects per kind (the fleet's namespaces and the global objects of its hierarchy), from %s to %s:", l.from.Name, l.to.Name)
	b, s, t := before.Kinds(), sourceAfter.Kinds(), targetAfter.Kinds()
	kinds := map[string]bool{}
	for _, m := range []map[string]int{b, s, t} {
		for k := range m {
			kinds[k] = true
		}
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  KIND\tSOURCE BEFORE\tSOURCE AFTER\tTARGET AFTER\t")
	var tb, ts, tt int
	for _, k := range names {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t\n", k, b[k], s[k], t[k])
		tb, ts, tt = tb+b[k], ts+s[k], tt+t[k]
	}
	fmt.Fprintf(tw, "  total\t%d\t%d\t%d\t\n", tb, ts, tt)
	_ = tw.Flush()
	if !moved {
		return
	}
	say("  (what stays in the source is the cluster-scoped identity and its credentials Secret:")
	say("   global objects are copied, never deleted; namespaces: %s)", strings.Join(namespaces, ", "))
}

func printReplicas(before, during, after map[string]int32) {
	say("\nController replicas (DURING: the fewest seen while the move ran):")
	keys := make([]string, 0, len(before))
	for k := range before {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tDEPLOYMENT\tBEFORE\tDURING\tAFTER")
	for _, k := range keys {
		low := "-"
		if n, ok := during[k]; ok {
			low = fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\n", k, before[k], low, after[k])
	}
	_ = tw.Flush()
}

func printPhases(mo *movev1alpha1.MoveOperation) {
	say("\nTime per phase:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	ts := mo.Status.PhaseTransitions
	for i, p := range ts {
		if i+1 < len(ts) {
			fmt.Fprintf(tw, "  %s\t%s\n", p.Phase, ts[i+1].Time.Sub(p.Time.Time))
		} else {
			fmt.Fprintf(tw, "  %s\t(at %s)\n", p.Phase, p.Time.UTC().Format(time.TimeOnly))
		}
	}
	fmt.Fprintf(tw, "  total\t%s\n", moveDuration(mo))
	_ = tw.Flush()
	say("  (transition times are stored with one-second precision, so short phases show 0s)")
}

func moveDuration(mo *movev1alpha1.MoveOperation) time.Duration {
	if mo.Status.StartTime == nil || mo.Status.CompletionTime == nil {
		return 0
	}
	return mo.Status.CompletionTime.Sub(mo.Status.StartTime.Time)
}

func printConditions(mo *movev1alpha1.MoveOperation) {
	say("\nMoveOperation %s/%s: phase %s", mo.Namespace, mo.Name, mo.Status.Phase)
	if mo.Status.FailureReason != "" {
		say("  failure: %s: %s", mo.Status.FailureReason, mo.Status.FailureMessage)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range mo.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = tw.Flush()
}

func step(title string) { say("\n==> %s", title) }

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }
