// Command safety is `make safety`: it moves identical fleets with every
// controller live, once with clusterctl's Go library (v1.14.2, as `make
// bench` uses it) and once with the operator (and, where a scenario asks,
// once more with the operator carrying status), in a set of scenarios
// where a controller acts during a move (a slow worker, a provider that
// ignores pause, a health check that turns unhealthy, a host whose state
// lives in its status), and counts what each move disturbed: VMs created,
// deleted or powered off and hosts provisioned (the simulated cloud's
// log), Machines created or deleted (the controllers' write logs), copies
// that differ from their original's last state (watches on both clusters),
// and whether the fleet settles in the target. It writes the table, the
// method and the sequence of events behind every non-zero figure to
// docs/safety.md.
//
// It starts two local management clusters with the live controllers
// (package testenv) and the operator in-process (package mover); it never
// touches anything outside the directories they create.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/testenv"
)

// options are the command's flags.
type options struct {
	out      string
	only     string
	settle   time.Duration
	keepLogs bool
	details  string
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "docs/safety.md", "where to write the report; a relative path is taken from the checkout's root, and the directory is made and checked writable before the run starts")
	flag.StringVar(&o.details, "details", "bin/safety-details.md", "where to write the report with every line of every run; a relative path is taken from the checkout's root, checked as -out is")
	flag.StringVar(&o.only, "only", "", "comma-separated scenario IDs to run (default: all)")
	flag.DurationVar(&o.settle, "settle", 30*time.Second, "how long a moved fleet is watched in the target")
	flag.BoolVar(&o.keepLogs, "keep-logs", false, "keep the clusters' logs even when every run worked")
	flag.Parse()
	os.Exit(run(o))
}

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// lab is the pair of clusters with both movers, shared by every run.
type lab struct {
	env     *testenv.Env
	op      *mover.Operator
	cc      *mover.Clusterctl
	kinds   []schema.GroupVersionKind
	workDir string
	settle  time.Duration
	// root is the checkout's root.
	root string
	// kit is the disaster drill's registry and key, made by its first run.
	kit *drillKit
}

func run(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The webhooks and the operator served in-process log through
	// controller-runtime's logger; the report is what this command prints.
	ctrl.SetLogger(logr.Discard())
	root, err := testenv.RepositoryRoot("make safety")
	if err != nil {
		say("%v", err)
		return 1
	}
	scenarios, err := selected(o.only)
	if err != nil {
		say("%v", err)
		return 1
	}
	// The run takes an hour: a report it cannot write is found now.
	paths := reportPaths{detailsName: o.details}
	if paths.out, err = reportPath(root, o.out); err != nil {
		say("-out: %v", err)
		return 2
	}
	if paths.details, err = reportPath(root, o.details); err != nil {
		say("-details: %v", err)
		return 2
	}
	workDir, err := os.MkdirTemp("", "move-operator-safety-")
	if err != nil {
		say("%v", err)
		return 1
	}
	began := time.Now()
	say("starting two local management clusters with the live controllers")
	env, err := testenv.Start(ctx, testenv.Options{CAPI: true, Controllers: true, Hosts: true, InMemory: true, Logf: func(f string, a ...any) { say("  "+f, a...) }})
	if err != nil {
		say("starting the clusters: %v", err)
		return 1
	}
	l := &lab{env: env, workDir: workDir, settle: o.settle, root: root}
	code := l.runAll(ctx, root, scenarios, paths, began)
	l.kit.stop()
	if l.op != nil {
		if err := l.op.Stop(); err != nil {
			say("the operator stopped with: %v", err)
		}
	}
	if err := env.Stop(); err != nil {
		say("stopping the clusters: %v", err)
	}
	if code != 0 || o.keepLogs {
		say("logs kept: %s, %s", env.LogDirs(), workDir)
	} else {
		_ = env.RemoveLogs()
		_ = os.RemoveAll(workDir)
	}
	return code
}

// reportPaths are where the two reports go; detailsName is how the short
// one names the full one.
type reportPaths struct{ out, details, detailsName string }

func (l *lab) runAll(ctx context.Context, root string, scenarios []scenario, paths reportPaths, began time.Time) int {
	var err error
	if l.op, err = mover.StartOperator(ctx, l.env, root, l.workDir); err != nil {
		say("starting the operator: %v", err)
		return 1
	}
	if l.cc, err = mover.NewClusterctl(ctx, l.env, l.workDir); err != nil {
		say("%v", err)
		return 1
	}
	if l.kinds, err = movedKinds(ctx, l.env.Source.Client); err != nil {
		say("%v", err)
		return 1
	}
	var results []result
	for _, s := range scenarios {
		for _, m := range s.moverList() {
			say("scenario %s (%s) with %s", s.id, s.title, m)
			r := l.runOne(ctx, s, m)
			say("  %s", r.summary())
			results = append(results, r)
			if ctx.Err() != nil {
				return 1
			}
		}
	}
	took := time.Since(began)
	if err := writeReport(paths.details, results, scenarios, took, reportForm{full: true}); err != nil {
		say("writing %s: %v", paths.details, err)
		return 1
	}
	if err := writeReport(paths.out, results, scenarios, took, reportForm{details: paths.detailsName}); err != nil {
		say("writing %s: %v", paths.out, err)
		return 1
	}
	say("wrote %s and, with every line of every run, %s in %s", paths.out, paths.details, took.Round(time.Second))
	return 0
}

// movedKinds are the kinds both movers take, at their storage versions.
func movedKinds(ctx context.Context, c client.Client) ([]schema.GroupVersionKind, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.HasLabels{clusterctlv1.ClusterctlLabel}); err != nil {
		return nil, fmt.Errorf("listing the CRDs labelled %s: %w", clusterctlv1.ClusterctlLabel, err)
	}
	kinds := []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Secret"), corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	for _, crd := range crds.Items {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				kinds = append(kinds, schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
			}
		}
	}
	return kinds, nil
}

func selected(only string) ([]scenario, error) {
	all := allScenarios()
	if only == "" {
		return all, nil
	}
	var out []scenario
	for _, id := range strings.Split(only, ",") {
		found := false
		for _, s := range all {
			if s.id == strings.TrimSpace(id) {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no scenario %q", id)
		}
	}
	return out, nil
}
