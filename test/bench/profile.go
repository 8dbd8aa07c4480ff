package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// profileSlice is how long each CPU profile lasts: the kube-apiserver's
// pprof handler wants the duration up front, so the bench takes profiles
// back to back and go tool pprof merges them. The last slice of a move is
// cut short and lost.
const profileSlice = "5"

// profiler takes CPU profiles of the kube-apiservers while a move runs
// (-profile DIR), to show where the API servers' time goes; the operator
// itself serves no pprof endpoint.
type profiler struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

// startProfiles profiles each server of servers into
// dir/<prefix>-<server>-<k>.pb.gz until stop.
func startProfiles(ctx context.Context, dir, prefix string, servers map[string]*rest.Config) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &profiler{cancel: cancel}
	for name, cfg := range servers {
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("building an HTTP client for %s: %w", name, err)
		}
		url := strings.TrimSuffix(cfg.Host, "/") + "/debug/pprof/profile?seconds=" + profileSlice
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for k := 0; ctx.Err() == nil; k++ {
				path := filepath.Join(dir, fmt.Sprintf("%s-%s-%03d.pb.gz", prefix, name, k))
				if err := fetchProfile(ctx, client, url, path); err != nil && ctx.Err() == nil {
					p.fail(fmt.Errorf("profiling %s: %w", name, err))
					return
				}
			}
		}()
	}
	return p, nil
}

func fetchProfile(ctx context.Context, client *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (p *profiler) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = errors.Join(p.err, err)
}

// stop ends the profiling and returns what went wrong.
func (p *profiler) stop() error {
	if p == nil {
		return nil
	}
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
