package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// heapSampler reads the operator's heap profile while it moves, and keeps
// the one taken when the heap held the most: the profile of the move's
// peak, to see what the bytes per object are. It asks for no
// garbage collection, so the process's RSS is what it would be unwatched.
type heapSampler struct {
	base string
	out  string

	mu sync.Mutex
	// peak is the largest in-use heap seen: what was live at the last
	// collection before the sample, as the profile estimates it.
	peak    uint64
	peakAt  time.Duration
	samples int
	err     error

	stopped chan struct{}
	cancel  context.CancelFunc
}

// startHeapSampler samples the heap profile served at base
// (http://host:port) every interval until stop, writing the peak's profile
// to out.
func startHeapSampler(ctx context.Context, base, out string, every time.Duration) *heapSampler {
	ctx, cancel := context.WithCancel(ctx)
	h := &heapSampler{base: base, out: out, stopped: make(chan struct{}), cancel: cancel}
	began := time.Now()
	go func() {
		defer close(h.stopped)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			h.sample(ctx, time.Since(began))
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return h
}

// sample reads the profile; when it shows a new peak, it saves it as
// read (the text format, which go tool pprof reads with the binary: a
// second request could find the profile of a later collection).
func (h *heapSampler) sample(ctx context.Context, at time.Duration) {
	inuse, text, err := h.inuse(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && h.err == nil {
			h.err = err
		}
		return
	}
	h.samples++
	if inuse <= h.peak {
		return
	}
	h.peak, h.peakAt = inuse, at
	if err := os.WriteFile(h.out, text, 0o644); err != nil && h.err == nil {
		h.err = err
	}
}

// inuse reads the text profile and adds up its records' in-use bytes,
// scaled as pprof scales them: a record of sampled allocations of average
// size s stands for 1/(1-exp(-s/rate)) times its bytes. The header gives
// twice the sampling rate: "heap profile: ... @ heap/<2*rate>"; each
// record starts "<in-use objects>: <in-use bytes> [<allocated>: <bytes>] @".
func (h *heapSampler) inuse(ctx context.Context) (uint64, []byte, error) {
	body, err := h.get(ctx, "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = body.Close() }()
	text, err := io.ReadAll(body)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the operator's heap profile: %w", err)
	}
	scanner := bufio.NewScanner(bytes.NewReader(text))
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	if !scanner.Scan() {
		return 0, nil, fmt.Errorf("the operator's heap profile is empty: %w", scanner.Err())
	}
	header := scanner.Text()
	_, rateText, found := strings.Cut(header, "@ heap/")
	twiceRate, err := strconv.ParseFloat(strings.TrimSpace(rateText), 64)
	if !found || err != nil || twiceRate <= 0 {
		return 0, nil, fmt.Errorf("the operator's heap profile starts with %q, not its sampling rate", header)
	}
	rate := twiceRate / 2
	var total float64
	for scanner.Scan() {
		var objects, bytes float64
		if n, _ := fmt.Sscanf(scanner.Text(), "%g: %g [", &objects, &bytes); n != 2 || objects == 0 {
			continue
		}
		total += bytes / (1 - math.Exp(-bytes/objects/rate))
	}
	return uint64(total), text, scanner.Err()
}

func (h *heapSampler) get(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+path, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the operator's heap profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("reading the operator's heap profile: %s", resp.Status)
	}
	return resp.Body, nil
}

// stop ends the sampling; it says where the peak was and returns the first
// error met, if any.
func (h *heapSampler) stop() (string, error) {
	if h == nil {
		return "", nil
	}
	h.cancel()
	<-h.stopped
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.samples == 0 {
		return "", h.err
	}
	return fmt.Sprintf("operator heap profile at its peak (%.0f MiB in use, %s into the move, %d samples): go tool pprof -top -sample_index=inuse_space %s %s",
		mib(h.peak), h.peakAt.Round(time.Second), h.samples, filepath.Join(filepath.Dir(h.out), "manager"), h.out), h.err
}
