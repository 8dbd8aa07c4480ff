package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
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
}

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
