package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/move-operator/move-operator/hack/image"
	"github.com/move-operator/move-operator/test/localcluster"
)

// machineInfo is what a reader needs to reproduce or discount the figures.
type machineInfo struct {
	date       string
	command    string
	cores      int
	cpuModel   string
	memory     string
	kernel     string
	goVersion  string
	commit     string
	settings   string
	loadBefore string
	loadAfter  string
	// operator says which manager binary ran and how (prepareOperator).
	operator string
	// viaMake says make ran the command (make bench), env the variables
	// set that change what a run does, and clusterAPI the version of
	// Cluster API (and clusterctl's library) the bench is built with.
	viaMake    bool
	env        []string
	clusterAPI string
}

// benchEnv are the variables that change what a run measures or keeps.
var benchEnv = []string{image.ImageDirEnv, localcluster.AuditEnv}

func describeMachine(ctx context.Context, root string, o options) machineInfo {
	m := machineInfo{
		date:       time.Now().UTC().Format("2006-01-02 15:04 MST"),
		command:    "bin/bench " + strings.Join(os.Args[1:], " ") + " (make bench builds bin/bench from ./test/bench)",
		cores:      runtime.NumCPU(),
		cpuModel:   procField("/proc/cpuinfo", "model name"),
		memory:     procField("/proc/meminfo", "MemTotal"),
		goVersion:  runtime.Version(),
		settings:   fmt.Sprintf("operator and floors: QPS %g, burst %d, %d requests in flight per cluster", o.qps, o.burst, o.concurrency),
		loadBefore: loadAverage(),
	}
	// GNU make exports MAKELEVEL to the commands it runs.
	m.viaMake = os.Getenv("MAKELEVEL") != ""
	for _, name := range benchEnv {
		if value, ok := os.LookupEnv(name); ok {
			m.env = append(m.env, name+"="+quoteArg(value))
		}
	}
	m.clusterAPI = moduleVersion("sigs.k8s.io/cluster-api")
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(data))
	}
	m.commit = gitDescribe(ctx, root)
	return m
}

func (m machineInfo) summary() string {
	return fmt.Sprintf("%d cores (%s), %s, %s, %s; commit %s; load average %s", m.cores, m.cpuModel, m.memory,
		m.kernel, m.goVersion, m.commit, m.loadBefore)
}

// gitDescribe names the commit measured and whether the working tree
// differed from it (the operator is built from the working tree).
func gitDescribe(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	status, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	if err == nil && len(strings.TrimSpace(string(status))) > 0 {
		n := len(strings.Split(strings.TrimSpace(string(status)), "\n"))
		commit += fmt.Sprintf(" with %d changed file(s) in the working tree", n)
	}
	return commit
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown"
}

// loadAverage is the 1, 5 and 15 minute load average: a busy machine makes
// every figure worse, and this says whether it was busy.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// moduleVersion is the version of a module the bench is built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "(version unknown)"
}
