package capirelease

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestAServiceEndpointPassesConnectionsOnlyWhileItsProcessIsReady follows
// an endpoint through a process's life: refused before the process answers
// its readiness probe, passing bytes both ways once it does, and refused
// again, its open connections cut, once it is closed.
func TestAServiceEndpointPassesConnectionsOnlyWhileItsProcessIsReady(t *testing.T) {
	backend := echoServer(t)
	var ready atomic.Bool
	probed := make(chan struct{}, 100)
	probe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
		select {
		case probed <- struct{}{}:
		default:
		}
	}))
	defer probe.Close()
	addr := freeAddr(t)
	e := newServiceEndpoint(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	e.openWhenReady(probe.URL, backend)
	for range 3 {
		select {
		case <-probed:
		case <-ctx.Done():
			t.Fatal("the endpoint never probed the process")
		}
	}
	if on, _, _ := e.state(); on {
		t.Fatal("the endpoint opened before the process answered its readiness probe")
	}
	assertRefused(t, addr)

	ready.Store(true)
	waitState(ctx, t, e, true)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialling the open endpoint: %v", err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("read %q, %v through the endpoint, want the echo of ping", buf, err)
	}

	if err := e.closeNow(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("read %d bytes from a connection the closed endpoint should have cut", n)
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection stayed open after the endpoint closed: %v", err)
	}
	assertRefused(t, addr)
}

func waitState(ctx context.Context, t *testing.T, e *serviceEndpoint, want bool) {
	t.Helper()
	for {
		on, changed, err := e.state()
		if on == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for the endpoint to be open=%t: %v (last error: %v)", want, ctx.Err(), err)
		case <-changed:
		}
	}
}

func assertRefused(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("dialling %s succeeded, want connection refused", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialling %s: %v, want connection refused", addr, err)
	}
}

// echoServer returns the address of a TCP server that echoes every line.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return l.Addr().String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
