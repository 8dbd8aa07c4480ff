package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

var sink []byte

// The sampler reads a real profile of this process: it must see a heap of
// the size the runtime reports, and keep the profile of the largest.
func TestTheHeapSamplerFindsTheLiveHeapOfARealProfile(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) {
		debug := 0
		if r.URL.Query().Get("debug") == "1" {
			debug = 1
		}
		if err := pprof.Lookup("heap").WriteTo(w, debug); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	server := httptest.NewServer(mux)
	defer server.Close()

	// Every block sampled, so the estimate is exact but for the rest of
	// the heap.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 4096
	// 128 MiB allocated and dropped: the profile's allocated totals are
	// then well above what is in use.
	for range 2048 {
		sink = make([]byte, 64<<10)
	}
	sink = nil
	// 64 MiB held in 64 KiB blocks, live across the samples.
	held := make([][]byte, 1024)
	for i := range held {
		held[i] = make([]byte, 64<<10)
	}
	// The profile is that of the last completed collection's heap, which
	// may be two collections old.
	runtime.GC()
	runtime.GC()
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)

	out := filepath.Join(t.TempDir(), "peak.heap")
	h := startHeapSampler(context.Background(), server.URL, out, 20*time.Millisecond)
	// Two samples, however long a loaded machine takes to serve them: a
	// fixed wait found none on busy cores.
	deadline := time.Now().Add(30 * time.Second)
	for h.sampled() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	summary, err := h.stop()
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(held)

	// The profile estimates from samples: within a fifth of what the
	// runtime counts live, which is at least the 64 MiB held.
	live := float64(stats.HeapAlloc)
	if got := float64(h.peak); math.Abs(got-live) > live/5 {
		t.Errorf("the sampler saw %.0f MiB in use, the runtime %.0f MiB", got/(1<<20), live/(1<<20))
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Errorf("the peak's profile was not written to %s: %v", out, err)
	}
	if summary == "" || h.samples < 2 {
		t.Errorf("expected a summary of several samples, got %d samples and %q", h.samples, summary)
	}
}

// sampled is how many profiles the sampler has read so far.
func (h *heapSampler) sampled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.samples
}

func TestTheHeapSamplerReportsAnUnreadableProfile(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("not a heap profile\n"))
	}))
	defer server.Close()
	h := startHeapSampler(context.Background(), server.URL, filepath.Join(t.TempDir(), "x"), time.Hour)
	time.Sleep(50 * time.Millisecond)
	if _, err := h.stop(); err == nil {
		t.Fatal("a profile without its header gave no error")
	}
}
