package capirelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// serviceEndpoint stands for a webhook Service with one ready endpoint: it
// listens on the Service's ClusterIP, port 443, which the API server dials,
// and passes every connection as it is (TLS and all) to the webhook port
// of the manager process on loopback, the pod's targetPort. It listens only
// while that process is ready: closed, the API server's call fails with
// "connect: connection refused", as with a Service whose Deployment is at
// zero. A released manager cannot listen on the ClusterIP itself: it binds
// its webhook server to every address (no flag sets the host), and port 443
// of every address is more than one cluster's to take.
type serviceEndpoint struct {
	addr string

	mu       sync.Mutex
	listener net.Listener
	backend  string
	conns    map[net.Conn]struct{}
	// changed is closed and replaced whenever the endpoint opens or
	// closes, so waiters need not poll.
	changed chan struct{}
	// lastErr is why the endpoint could not open, if it could not.
	lastErr error
	// cancelReady stops the wait for the current process to be ready.
	cancelReady context.CancelFunc
}

func newServiceEndpoint(addr string) *serviceEndpoint {
	return &serviceEndpoint{addr: addr, conns: map[net.Conn]struct{}{}, changed: make(chan struct{})}
}

// openWhenReady opens the endpoint once the process answers its readiness
// probe (GET readyz: controller-runtime's, which passes once the webhook
// server has started), as a kubelet adds a pod to its Service's endpoints
// only then. It gives up when closeNow is called first.
func (s *serviceEndpoint) openWhenReady(readyz, backend string) {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.cancelReady != nil {
		s.cancelReady()
	}
	s.cancelReady = cancel
	s.mu.Unlock()
	go func() {
		probe := &http.Client{Timeout: time.Second}
		for !probeOK(ctx, probe, readyz) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if ctx.Err() != nil {
			return // closed meanwhile
		}
		if err := s.openLocked(backend); err != nil {
			s.lastErr = err
		}
	}()
}

func probeOK(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *serviceEndpoint) openLocked(backend string) error {
	if s.listener != nil {
		s.backend = backend
		return nil
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	s.listener, s.backend, s.lastErr = l, backend, nil
	go s.accept(l)
	s.notifyLocked()
	return nil
}

func (s *serviceEndpoint) accept(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.listener != l {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		backend := s.backend
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		go s.pipe(conn, backend)
	}
}

// pipe passes one connection to the backend and back. If the backend
// refuses (the process is going), the caller's connection is closed
// unanswered, as a pod gone mid-call.
func (s *serviceEndpoint) pipe(conn net.Conn, backend string) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close()
	}()
	up, err := net.DialTimeout("tcp", backend, 5*time.Second)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.conns[up] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, up)
		s.mu.Unlock()
		_ = up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// closeNow closes the listener and every connection through it at once, as
// a pod's endpoint leaving its Service when the pod starts terminating: a
// call in flight fails, a new one is refused.
func (s *serviceEndpoint) closeNow() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelReady != nil {
		s.cancelReady()
		s.cancelReady = nil
	}
	if s.listener == nil {
		return nil
	}
	err := s.listener.Close()
	s.listener = nil
	for c := range s.conns {
		_ = c.Close()
		delete(s.conns, c)
	}
	s.notifyLocked()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *serviceEndpoint) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// state reports whether the endpoint is open, a channel closed at its next
// change, and why it last failed to open.
func (s *serviceEndpoint) state() (bool, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listener != nil, s.changed, s.lastErr
}
