package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// requestCounts are requests by verb (GET, LIST, POST, PATCH, ...).
type requestCounts map[string]float64

func (r requestCounts) total() float64 {
	t := 0.0
	for _, n := range r {
		t += n
	}
	return t
}

// sub returns r - before, verb by verb.
func (r requestCounts) sub(before requestCounts) requestCounts {
	out := requestCounts{}
	for verb, n := range r {
		if d := n - before[verb]; d != 0 {
			out[verb] = d
		}
	}
	return out
}

// String lists the verbs with the most requests first: "1200 (PATCH 500, DELETE 400, ...)".
func (r requestCounts) String() string {
	verbs := make([]string, 0, len(r))
	for v := range r {
		verbs = append(verbs, v)
	}
	sort.Slice(verbs, func(i, j int) bool {
		if r[verbs[i]] != r[verbs[j]] {
			return r[verbs[i]] > r[verbs[j]]
		}
		return verbs[i] < verbs[j]
	})
	parts := make([]string, len(verbs))
	for i, v := range verbs {
		parts[i] = fmt.Sprintf("%s %.0f", v, r[v])
	}
	return fmt.Sprintf("%.0f (%s)", r.total(), strings.Join(parts, ", "))
}

// scrape reads a Prometheus text endpoint through client and returns its
// metric families.
func scrape(ctx context.Context, client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics of %s: %w", url, err)
	}
	return families, nil
}

// sumBy adds up the counter family name by the value of label key,
// keeping only the series whose labels match every entry of where.
func sumBy(families map[string]*dto.MetricFamily, name, key string, where map[string]string) requestCounts {
	out := requestCounts{}
	family, ok := families[name]
	if !ok {
		return out
	}
series:
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range where {
			if labels[k] != v {
				continue series
			}
		}
		out[labels[key]] += m.GetCounter().GetValue()
	}
	return out
}

// serverSample is what a kube-apiserver's counters said at one instant.
type serverSample struct {
	// requests served, by verb.
	requests requestCounts
	// webhooks is the admission webhook calls it made.
	webhooks webhookUse
	// storage is the lists kube-apiserver made of etcd, and the objects
	// they read, by resource. Clients' lists are served from the watch
	// caches; what reaches etcd is mostly the watch caches filling
	// themselves again (see storageReads).
	storage storageReads
}

// storageReads are the lists a kube-apiserver made of etcd during a move
// and the objects they read, by resource. A watch cache whose watch ends
// lists its resource from etcd again, once a second for as long as the
// list fails: a CRD version that is not the storage version is filled
// through the CRD's conversion webhook, which is down while its provider
// is scaled to zero, so every such cache a move disturbs reads its whole
// resource from etcd once a second until the provider is back.
type storageReads struct {
	lists, fetched requestCounts
}

// sub is what was read between an earlier sample and this one.
func (s storageReads) sub(before storageReads) storageReads {
	return storageReads{lists: s.lists.sub(before.lists), fetched: s.fetched.sub(before.fetched)}
}

// largest names the resources whose lists read the most objects, then
// those listed most often.
func (s storageReads) largest(n int) string {
	names := make([]string, 0, len(s.lists))
	for name := range s.lists {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if s.fetched[names[i]] != s.fetched[names[j]] {
			return s.fetched[names[i]] > s.fetched[names[j]]
		}
		if s.lists[names[i]] != s.lists[names[j]] {
			return s.lists[names[i]] > s.lists[names[j]]
		}
		return names[i] < names[j]
	})
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.0f lists, %.0f objects", name, s.lists[name], s.fetched[name]))
	}
	return strings.Join(parts, "; ")
}

// webhookUse is admission webhook calls: how many, how long they took
// altogether and per webhook, and how many rejected the request.
type webhookUse struct {
	calls, seconds, rejections float64
	secondsByName              map[string]float64
}

func (w webhookUse) sub(before webhookUse) webhookUse {
	out := webhookUse{calls: w.calls - before.calls, seconds: w.seconds - before.seconds,
		rejections: w.rejections - before.rejections, secondsByName: map[string]float64{}}
	for name, s := range w.secondsByName {
		if d := s - before.secondsByName[name]; d > 0 {
			out.secondsByName[name] = d
		}
	}
	return out
}

// slowest names the webhooks that took the most time, with their seconds.
func (w webhookUse) slowest(n int) string {
	names := make([]string, 0, len(w.secondsByName))
	for name := range w.secondsByName {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return w.secondsByName[names[i]] > w.secondsByName[names[j]] })
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.1fs", name, w.secondsByName[name]))
	}
	return strings.Join(parts, ", ")
}

// sampleServer reads a kube-apiserver's own /metrics (with an admin
// configuration): requests served by verb, and admission webhook calls. The
// counters cover every client: what a move cost the API server is the
// difference between two samples around it, background included (see
// clusters.measureIdle).
func sampleServer(ctx context.Context, cfg *rest.Config) (serverSample, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return serverSample{}, fmt.Errorf("building an HTTP client for %s: %w", cfg.Host, err)
	}
	families, err := scrape(ctx, client, strings.TrimSuffix(cfg.Host, "/")+"/metrics")
	if err != nil {
		return serverSample{}, err
	}
	s := serverSample{requests: sumBy(families, "apiserver_request_total", "verb", nil)}
	s.webhooks.secondsByName = map[string]float64{}
	if f, ok := families["apiserver_admission_webhook_admission_duration_seconds"]; ok {
		for _, m := range f.GetMetric() {
			s.webhooks.calls += float64(m.GetHistogram().GetSampleCount())
			s.webhooks.seconds += m.GetHistogram().GetSampleSum()
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					s.webhooks.secondsByName[l.GetValue()] += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	s.webhooks.rejections = sumBy(families, "apiserver_admission_webhook_rejection_count", "", nil).total()
	s.storage = storageReads{
		lists:   sumBy(families, "apiserver_storage_list_total", "resource", nil),
		fetched: sumBy(families, "apiserver_storage_list_fetched_objects_total", "resource", nil),
	}
	return s, nil
}

// processCPU is the CPU time (user + system) a process has used.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	// Linux reports these in clock ticks of USER_HZ, 100 on every
	// architecture Go supports here.
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// peakRSS is a process's peak resident set size (VmHWM), in bytes.
func peakRSS(pid int) (uint64, error) { return statusBytes(pid, "VmHWM") }

// fileRSS is how much of a process's resident set is pages of files it
// maps (RssFile), in bytes: for the operator, its own binary's code and
// read-only data, which are there however small the fleet.
func fileRSS(pid int) (uint64, error) { return statusBytes(pid, "RssFile") }

// statusBytes reads a field of /proc/PID/status given in kB, in bytes.
func statusBytes(pid int, field string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %s %q: %w", pid, field, rest, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// component is a process whose CPU time the bench accounts for.
type component struct {
	// name is what the report calls it, e.g. "source kube-apiserver".
	name string
	pid  int
}

// cpuSample is the CPU time of every component at one instant.
type cpuSample map[string]time.Duration

// sampleCPU reads the CPU time of every component; a process that has
// gone is left out.
func sampleCPU(components []component) cpuSample {
	out := cpuSample{}
	for _, c := range components {
		if d, err := processCPU(c.pid); err == nil {
			out[c.name] += d
		}
	}
	return out
}

func (s cpuSample) sub(before cpuSample) cpuSample {
	out := cpuSample{}
	for k, v := range s {
		out[k] = v - before[k]
	}
	return out
}

// findProcesses returns the processes whose command line holds every one
// of the given substrings: how the bench finds the etcd and kube-apiserver
// of a local cluster (their arguments name the cluster's directory).
func findProcesses(substrings ...string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(data), "\x00", " ")
		all := true
		for _, s := range substrings {
			if !strings.Contains(cmdline, s) {
				all = false
				break
			}
		}
		if all {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
