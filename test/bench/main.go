// Command bench is `make bench`: it moves the same fleet of Cluster API
// workload clusters between two local management clusters with
// `clusterctl move` (its Go library) and with move-operator (a MoveOperation
// handled by the real operator process), and moves two more copies with
// plain parallel requests: the baseline, the floor any mover can approach,
// and the parity floor, the baseline plus the per-object writes a faithful
// move must make (the managed-fields restore, the status where the move
// carries it). It prints, for every fleet size N, the wall time of the
// whole move and of its copy+delete part, the objects moved, the API
// requests each API server served (by verb), the CPU time of every process,
// the operator's peak RSS and how long each mover kept each cluster's
// controllers from running, each tool's median over the repetitions, the
// ratios operator/clusterctl and operator/floor pair by pair; on the
// terminal, the targets the operator is held to are checked against them.
// With -out it writes the whole Markdown page (page.go): make bench writes
// docs/benchmarks.md so, from the run alone, with the command that ran it.
//
//	go run ./test/bench -n 10,50,100 -reps 3 -out docs/benchmarks.md
//
// For each N it starts a fresh pair of local management clusters (package
// testenv: real etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok processes, Cluster API installed as clusterctl
// init leaves it, provider webhooks served by this process). For each
// repetition it creates four identical fleets (package fleet) in four
// namespaces of the source, and moves one with each mover: clusterctl, the
// operator, the baseline and the parity floor, the order rotating by one
// place per repetition (see moveOrder in fleets.go). With -carry one more
// fleet is moved by the operator with spec.objectStatusPolicy Carry, in the same
// rotation, and the report states what carrying status costs against the
// operator's default move of the same repetition. Each move is checked
// afterwards: the target namespace holds every object the source namespace
// held, the source namespace holds none.
//
// With -backup (make bench-backup, writing docs/benchmarks-backup.md) it
// measures backups and restores instead: clusterctl move --to-directory
// and --from-directory against MoveOperations whose target, then source,
// is an archive, each restore into the cluster that never held the fleet
// (see backup.go).
//
// The operator runs as users install it (package installed): the manager
// binary taken out of the host platform's image (hack/image builds it from
// this working tree into bin/image, as make image does, unless
// MOVE_OPERATOR_IMAGE_DIR names the tarballs make image wrote), with the
// args and env of the Deployment in dist/install.yaml, the ServiceAccount
// and RBAC of that file as its only rights in the source, and a target
// credential made as `manager target-access` makes it from
// dist/target-access.yaml. The bench adds only what it measures with or
// tunes (see operatorMover.prepare). It is started afresh for every move, so
// its peak RSS belongs to that move alone. clusterctl and both floors use
// the clusters' admin kubeconfigs, as users run clusterctl.
//
// The program never touches anything outside bin/image and the directories
// it and package installed create under the system's temporary directory;
// it removes its own when it succeeds (logs are kept on failure).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/localcluster"
	usermove "github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/testenv"
)

// The operator's client settings by default, as main.go declares them
// (--kube-api-qps, --kube-api-burst) and internal/move.DefaultConcurrency
// (--move-concurrency). The bench passes them to the operator explicitly and
// gives the baseline the same, so both always run with equal limits.
const (
	defaultQPS         = 500
	defaultBurst       = 1000
	defaultConcurrency = 8
)

// options are the command-line settings.
type options struct {
	sizes []int
	// reps is the number of repetitions of each N, repsFor the N that
	// have another.
	reps    int
	repsFor map[int]int
	// out is where the page goes (-out), as given; bench.out is where
	// that resolves.
	out         string
	qps         float64
	burst       int
	concurrency int
	moveTimeout time.Duration
	// skipBaseline leaves out the third fleet and its move, for quicker
	// runs while comparing the two tools only.
	skipBaseline bool
	// skipParity leaves out the parity floor's fleet and move, which
	// otherwise run whenever the baseline does.
	skipParity bool
	// parityOnly leaves out the plain baseline but keeps the parity
	// floor: at large N, where each fleet takes minutes to create, the
	// targets need only the floor that does the operator's work.
	parityOnly bool
	// skipClusterctl leaves out clusterctl's fleet and move, for quick
	// measurements of the operator against its floor while changing it.
	skipClusterctl bool
	// carry adds a fleet the operator moves with spec.objectStatusPolicy Carry, so
	// that every repetition measures what carrying status costs against
	// the default move on the same clusters.
	carry bool
	// baselineFirst moves the baseline before the others in every
	// repetition, while the source holds every fleet.
	baselineFirst bool
	// alone moves each fleet on its own fresh pair of clusters, created
	// just before its move, so that no mover's API servers hold another
	// mover's fleet.
	alone bool
	// capd moves fleets of CAPD's in-memory provider, provisioned and
	// reconciled by live controllers in both clusters (see devfleets.go).
	capd bool
	// keepLogs keeps the work directory, with every process's log, after
	// a run that succeeded too.
	keepLogs bool
	// operatorFlags are more flags for the operator, such as
	// --zap-log-level=debug to see every group's timing in its log.
	operatorFlags []string
	// profileDir, when set, receives CPU profiles of both kube-apiservers
	// taken during every move.
	profileDir string
	// heapProfileDir, when set, receives the operator's heap profile at the
	// peak of each of its moves.
	heapProfileDir string
	// goMemLimit is the operator's GOMEMLIMIT: "deployment" for the one
	// its Deployment sets, "off" for none, or a value as Go reads it.
	goMemLimit string
	// conversionWhileStopped keeps the providers' conversion webhooks
	// served while their Deployments are at zero (see
	// capiprovider.Installation.SetConversionWhileStopped).
	conversionWhileStopped bool
	// podStartLatency is how long a scheduled pod of the local clusters
	// takes to become Ready (localcluster.Options.PodStartLatency).
	podStartLatency time.Duration
	// backup measures backups and restores (backup.go) instead of moves:
	// make bench-backup.
	backup bool
	// rssN is the fleet size of the backup whose peak RSS alone is
	// measured after the others (-backup only); 0 leaves it out.
	rssN int
	// args are the command's arguments as given, and flags every flag
	// with its value in this run: the page says how to run it again.
	args  []string
	flags []flagSetting
}

// flagSetting is one flag of a run: its value, its default and whether
// the command line set it.
type flagSetting struct {
	name, value, def, usage string
	set                     bool
}

// movers are the movers every repetition runs.
func (o options) movers() movers {
	if o.capd {
		// The floors copy and delete without stopping or pausing anything:
		// with live controllers, the source's would take the deletes for
		// real ones and delete the VMs the target's copies stand for.
		return movers{clusterctl: !o.skipClusterctl, carry: o.carry}
	}
	return movers{
		clusterctl: !o.skipClusterctl, baseline: !o.skipBaseline && !o.parityOnly, carry: o.carry, baselineFirst: o.baselineFirst,
		parity: !o.skipBaseline && !o.skipParity,
	}
}

// repetitions is how many times fleets of n clusters are moved.
func (o options) repetitions(n int) int {
	if r, ok := o.repsFor[n]; ok {
		return r
	}
	return o.reps
}

func parseOptions(args []string) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	sizes := fs.String("n", "10,50,100", "comma-separated fleet sizes N (workload clusters, 3 control-plane and 3 worker Machines each)")
	reps := fs.String("reps", "3,100=2", "repetitions per N (the report gives the median): a number for every N, then N=count for exceptions")
	fs.StringVar(&o.out, "out", "", "write the report to this file too, as the whole Markdown page docs/benchmarks.md is (make bench: -out docs/benchmarks.md); "+
		"a relative path is taken from the checkout's root, and the file's directory is made and checked writable before the run starts")
	fs.Float64Var(&o.qps, "qps", defaultQPS, "client QPS of the operator (--kube-api-qps) and of the floors")
	fs.IntVar(&o.burst, "burst", defaultBurst, "client burst of the operator (--kube-api-burst) and of the floors")
	fs.IntVar(&o.concurrency, "concurrency", defaultConcurrency, "requests in flight per cluster, operator (--move-concurrency) and floors")
	fs.DurationVar(&o.moveTimeout, "move-timeout", 0, "fail a move that takes longer (default: 45m, or 5s per workload cluster when that is longer)")
	fs.BoolVar(&o.skipBaseline, "skip-baseline", false, "do not run the raw-request baseline")
	fs.BoolVar(&o.skipParity, "skip-parity", false, "do not run the parity floor (the baseline plus the per-object writes a faithful move makes); it runs whenever the baseline does otherwise")
	fs.BoolVar(&o.parityOnly, "parity-only", false, "of the two floors run only the parity floor, not the plain baseline (for large N, where each fleet takes minutes to create)")
	fs.BoolVar(&o.skipClusterctl, "skip-clusterctl", false, "do not run clusterctl move (to measure the operator against the baseline only)")
	fs.BoolVar(&o.carry, "carry", false, "also move a fleet with the operator and spec.objectStatusPolicy Carry, in the same rotation, and report its cost against the default move (Rebuild) of the same repetition")
	fs.BoolVar(&o.baselineFirst, "baseline-first", false, "move the baseline first in every repetition, while the source holds every fleet (it rotates with the others otherwise)")
	fs.BoolVar(&o.alone, "alone", false, "move each fleet on its own fresh pair of clusters holding only that fleet, created just before its move (for large N: the API servers then hold one fleet, not one per mover)")
	fs.BoolVar(&o.capd, "capd", false, "move fleets of Cluster API's own in-memory provider (CAPD's DevClusters: N workload clusters, classic and from upstream's ClusterClass template, one control-plane and one worker Machine each) provisioned by live controllers in both clusters, instead of the static fleets; clusterctl and the operator only")
	fs.BoolVar(&o.keepLogs, "keep-logs", false, "keep the work directory with every log after a successful run too")
	operatorFlags := fs.String("operator-flags", "", "more flags for the operator, space-separated (e.g. --zap-log-level=debug)")
	fs.StringVar(&o.profileDir, "profile", "", "write CPU profiles of both kube-apiservers during every move to this directory")
	fs.StringVar(&o.goMemLimit, "operator-gomemlimit", "deployment", "the operator's GOMEMLIMIT: \"deployment\" for the one the Deployment in "+installed.InstallPath+" gives it, \"off\" for none, or a value such as 128MiB")
	fs.DurationVar(&o.podStartLatency, "pod-start-latency", 0, "how long a scheduled pod of the local clusters takes to become Running and Ready (kwok's pod-ready stage); 0: at once, as kwok does. A provider's pod on a real node takes seconds: the container starts, the manager syncs its caches and starts its webhook server, and the kubelet's readiness probe sees it")
	fs.BoolVar(&o.conversionWhileStopped, "conversion-while-stopped", false, "serve the providers' CRD conversion webhooks while their Deployments are at zero, admission still refused: what a move would cost if stopping the controllers did not stop conversion (not what real providers do)")
	fs.StringVar(&o.heapProfileDir, "heap-profile", "", "sample the operator's heap every 2 s during its moves and write the profile taken at the peak to this directory")
	fs.BoolVar(&o.backup, "backup", false, "measure backups and restores instead of moves (make bench-backup): clusterctl move --to-directory and --from-directory "+
		"against MoveOperations whose target, then source, is an archive; -n defaults to "+backupSizes+" and -reps to "+backupReps+" (see backup.go)")
	fs.IntVar(&o.rssN, "rss-n", largeSize, "with -backup: after the other sizes, the operator's backup alone of a fleet of this many clusters, for its peak RSS (0: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	o.args = args
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.backup {
		// make bench-backup's sizes and repetitions, unless given.
		if !set["n"] {
			*sizes = backupSizes
		}
		if !set["reps"] {
			*reps = backupReps
		}
	}
	if o.rssN < 0 {
		return o, fmt.Errorf("-rss-n: %d is not a fleet size", o.rssN)
	}
	fs.VisitAll(func(f *flag.Flag) {
		o.flags = append(o.flags, flagSetting{name: f.Name, value: f.Value.String(), def: f.DefValue, usage: f.Usage, set: set[f.Name]})
	})
	o.operatorFlags = strings.Fields(*operatorFlags)
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-n: %q is not a positive number", s)
		}
		o.sizes = append(o.sizes, n)
	}
	if err := o.parseReps(*reps); err != nil {
		return o, err
	}
	if o.concurrency < 1 || o.qps <= 0 || o.burst < 1 {
		return o, fmt.Errorf("-qps, -burst and -concurrency must be positive")
	}
	return o, nil
}

// parseReps reads -reps: "3" or "3,100=2" (3 repetitions, 2 for N=100).
func (o *options) parseReps(spec string) error {
	o.reps, o.repsFor = 0, map[int]int{}
	for _, item := range strings.Split(spec, ",") {
		key, value, exception := strings.Cut(strings.TrimSpace(item), "=")
		if !exception {
			value = key
		}
		count, err := strconv.Atoi(value)
		if err != nil || count < 1 {
			return fmt.Errorf("-reps: %q is not a positive number of repetitions", item)
		}
		if !exception {
			o.reps = count
			continue
		}
		n, err := strconv.Atoi(key)
		if err != nil || n < 1 {
			return fmt.Errorf("-reps: %q does not start with a fleet size", item)
		}
		o.repsFor[n] = count
	}
	if o.reps == 0 {
		return fmt.Errorf("-reps %q gives no count for every N", spec)
	}
	return nil
}

func main() {
	os.Exit(run())
}

func run() int {
	opts, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{opts: opts, began: time.Now(), idle: map[int]map[string]float64{}}
	err = b.run(ctx)
	b.cleanup(err == nil && !opts.keepLogs)
	if err == nil && opts.keepLogs {
		say("logs kept in %s", b.workDir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nBENCH FAILED: %v\n", err)
		if b.workDir != "" {
			fmt.Fprintf(os.Stderr, "logs kept in %s\n", b.workDir)
		}
		return 1
	}
	return 0
}

// bench holds what a run started and measured.
type bench struct {
	opts    options
	began   time.Time
	root    string
	workDir string
	// out is where the page is written: -out resolved, empty for none.
	out string
	// install is dist/install.yaml: the operator's Deployment and identity.
	install *installed.Install
	// manager is the manager binary taken out of the image.
	manager string
	// goMemLimit is the GOMEMLIMIT the operator runs with.
	goMemLimit goMemLimit
	machine    machineInfo
	// clusters is the pair of the size being measured.
	clusters *clusters
	// clusterctlLog is clusterctl's logger, which writes to
	// clusterctlLogFile through a buffer.
	clusterctlLog     *usermove.ClusterctlLog
	clusterctlLogFile *os.File
	results           []*result
	// idle is the background request rate of each size's clusters.
	idle map[int]map[string]float64
}

func (b *bench) run(ctx context.Context) error {
	var err error
	if b.root, err = testenv.RepositoryRoot("make bench"); err != nil {
		return err
	}
	// A run takes hours: a report it cannot write is found now, not then.
	if b.opts.out != "" {
		if b.out, err = reportPath(b.root, b.opts.out); err != nil {
			return fmt.Errorf("-out: %w", err)
		}
	}
	if b.workDir, err = os.MkdirTemp("", "move-operator-bench-"); err != nil {
		return err
	}
	// The Cluster API webhooks this process serves log through
	// controller-runtime's logger; clusterctl logs through its own.
	webhookLog, err := os.Create(filepath.Join(b.workDir, "webhooks.log"))
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(webhookLog), zap.Level(zapcore.InfoLevel)))
	if b.clusterctlLogFile, err = os.Create(filepath.Join(b.workDir, "clusterctl.log")); err != nil {
		return err
	}
	b.clusterctlLog = usermove.NewClusterctlLog(bufio.NewWriter(b.clusterctlLogFile))
	b.machine = describeMachine(ctx, b.root, b.opts)
	if b.opts.backup {
		say("move-operator backup benchmark: clusterctl move --to-directory/--from-directory vs MoveOperations to and from an archive; %s", b.opts.backupPlan())
	} else {
		say("move-operator benchmark: clusterctl move vs move-operator vs raw requests; %s", b.opts.plan())
	}
	say("machine: %s", b.machine.summary())
	say("work directory (logs): %s", b.workDir)

	binDir, err := localcluster.BinaryDir(ctx)
	if err != nil {
		return err
	}
	say("Kubernetes binaries: %s", binDir)
	if err := b.prepareOperator(); err != nil {
		return err
	}
	if b.opts.backup {
		return b.runBackups(ctx)
	}

	for _, n := range b.opts.sizes {
		if err := b.runSize(ctx, n); err != nil {
			return fmt.Errorf("fleets of %d clusters: %w", n, err)
		}
	}
	b.machine.loadAfter = loadAverage()
	rep := newReport(b.opts, b.machine, b.results, b.idle, time.Since(b.began))
	fmt.Print("\n" + rep.text())
	if b.out != "" {
		if err := os.WriteFile(b.out, []byte(rep.page()), 0o644); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		say("report written to %s", b.out)
	}
	return nil
}

// runSize measures every repetition at fleet size n on a fresh pair of
// clusters, so what earlier sizes left in the target does not weigh on it;
// with -alone, every move of every repetition on a pair of its own.
func (b *bench) runSize(ctx context.Context, n int) error {
	reps := b.opts.repetitions(n)
	m := b.opts.movers()
	if !b.opts.alone {
		return b.withClusters(ctx, n, func(c *clusters) error {
			for rep := 1; rep <= reps; rep++ {
				step("N=%d, repetition %d/%d: creating the fleets", n, rep, reps)
				fleets, err := c.createFleets(ctx, n, rep, m)
				if err != nil {
					return err
				}
				for i, f := range fleets {
					if err := b.measureAndRecord(ctx, f, n, rep, i+1); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	for rep := 1; rep <= reps; rep++ {
		for i, tool := range moveOrder(rep, m) {
			err := b.withClusters(ctx, n, func(c *clusters) error {
				step("N=%d, repetition %d/%d, %s: creating its fleet alone", n, rep, reps, tool)
				began := time.Now()
				f, err := c.createFleet(ctx, tool, n, rep)
				if err != nil {
					return err
				}
				say("  a fleet of %d objects in %s", f.fleet.Total(), time.Since(began).Round(time.Second))
				return b.measureAndRecord(ctx, f, n, rep, i+1)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// withClusters runs f on a fresh pair of local management clusters and
// stops them after it, keeping their logs if it failed.
func (b *bench) withClusters(ctx context.Context, n int, f func(*clusters) error) (err error) {
	step("N=%d: starting two local management clusters with Cluster API", n)
	c, err := startClusters(ctx, b)
	if err != nil {
		return err
	}
	b.clusters = c
	if _, measured := b.idle[n]; !measured {
		b.idle[n] = c.idle
	}
	defer func() {
		if stopErr := c.stop(err != nil || b.opts.keepLogs); stopErr != nil {
			say("stopping the clusters: %v", stopErr)
		}
		b.clusters = nil
	}()
	return f(c)
}

// measureAndRecord measures the move of f and keeps its result.
func (b *bench) measureAndRecord(ctx context.Context, f benchFleet, n, rep, position int) error {
	r := &result{tool: f.tool, n: n, rep: rep, position: position}
	if err := b.measure(ctx, f, r); err != nil {
		return fmt.Errorf("repetition %d, %s: %w", rep, f.tool, err)
	}
	b.results = append(b.results, r)
	say("  %s", r.line())
	return nil
}

func (b *bench) cleanup(removeLogs bool) {
	if b.clusters != nil {
		_ = b.clusters.stop(!removeLogs)
	}
	if b.clusterctlLog != nil {
		_ = b.clusterctlLog.Flush()
		_ = b.clusterctlLogFile.Close()
	}
	if removeLogs && b.workDir != "" {
		_ = os.RemoveAll(b.workDir)
		b.workDir = ""
	}
}

func step(format string, args ...any) { say("\n==> "+format, args...) }

func say(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
}

// plan says which sizes run how many times: "N=10 ×3, N=100 ×2".
func (o options) plan() string {
	parts := make([]string, len(o.sizes))
	for i, n := range o.sizes {
		parts[i] = fmt.Sprintf("N=%d ×%d", n, o.repetitions(n))
	}
	if o.capd {
		return strings.Join(parts, ", ") + ", CAPD in-memory fleets, every controller live"
	}
	return strings.Join(parts, ", ")
}

// moveTimeoutFor is how long a move of n workload clusters may take. At
// N=1,000 the operator's move took more than the 45 minutes that bound
// N=100's: by default the bound grows with the fleet.
func (o options) moveTimeoutFor(n int) time.Duration {
	if o.moveTimeout > 0 {
		return o.moveTimeout
	}
	return max(45*time.Minute, time.Duration(n)*5*time.Second)
}
