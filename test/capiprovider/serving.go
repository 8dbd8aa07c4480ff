package capiprovider

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// webhookServer serves one provider's webhooks on its Service's ClusterIP,
// port 443, but only while told to: the API server dials the ClusterIP, so a
// closed server yields exactly what a provider scaled to zero yields in a
// real cluster, "connect: connection refused".
//
// With conversionWhileStopped it stays open while the provider is stopped,
// answering its CRD conversion webhook and dropping every admission call
// unanswered (the API server's call fails, and a failurePolicy Fail webhook
// refuses the request as it does with the backend gone): what a provider
// whose controllers stop while its conversion keeps serving would give. The
// bench uses it to measure what such a design would save.
type webhookServer struct {
	addr    string
	handler http.Handler
	tls     *tls.Config
	errLog  *log.Logger

	// ready is whether the provider's Deployment has Ready pods: every
	// webhook is answered. Read without the lock by the handler.
	ready atomic.Bool

	mu                     sync.Mutex
	conversionWhileStopped bool
	server                 *http.Server
	// changed is closed and replaced whenever ready changes, so waiters
	// need not poll.
	changed chan struct{}
}

// conversionPath is where controller-runtime serves a manager's CRD
// conversion webhook.
const conversionPath = "/convert"

func newWebhookServer(addr string, handler http.Handler, cert tls.Certificate, errLog *log.Logger) *webhookServer {
	s := &webhookServer{
		addr: addr,
		// HTTP/1.1 only, as Cluster API serves by default (--enable-http2=false).
		tls:     &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		errLog:  errLog,
		changed: make(chan struct{}),
	}
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() && r.URL.Path != conversionPath {
			dropUnanswered(w)
			return
		}
		handler.ServeHTTP(w, r)
	})
	return s
}

// dropUnanswered closes the connection of a call without an answer, as a
// backend that went away mid-call does.
func dropUnanswered(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	http.Error(w, "provider stopped", http.StatusServiceUnavailable)
}

// setServing records whether the provider's Deployment has Ready pods, and
// opens or closes the server to match.
func (s *webhookServer) setServing(on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setServingLocked(on)
}

// setServingLocked is setServing with s.mu held. Ready is reported only
// once the server listens: a port that cannot be bound leaves the webhooks
// refused, and WaitServing says why.
func (s *webhookServer) setServingLocked(on bool) error {
	if on {
		if err := s.listen(true); err != nil {
			return err
		}
	}
	if s.ready.Load() != on {
		s.ready.Store(on)
		s.notify()
	}
	return s.listen(on || s.conversionWhileStopped)
}

// setConversionWhileStopped keeps the conversion webhook served while the
// provider is stopped (on), or stops serving it with the rest (off, the
// default, as a real provider scaled to zero).
func (s *webhookServer) setConversionWhileStopped(on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conversionWhileStopped = on
	return s.listen(s.ready.Load() || on)
}

// stop closes the server for good, whatever it serves.
func (s *webhookServer) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conversionWhileStopped = false
	return s.setServingLocked(false)
}

// listen opens or closes the server; s.mu is held. Closing closes the
// listener and every open connection at once (http.Server.Close, not
// Shutdown): a pod that goes away does not finish its keep-alive
// connections politely either.
func (s *webhookServer) listen(on bool) error {
	if on == (s.server != nil) {
		return nil
	}
	if !on {
		err := s.server.Close()
		s.server = nil
		return err
	}
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          s.errLog,
	}
	// Every call on a new connection: a connection kept alive across Close
	// would make the API server's next call fail on a write to it ("broken
	// pipe") instead of on connect, a race that real clusters do not show
	// in the same way and tests could not rely on.
	srv.SetKeepAlivesEnabled(false)
	go func() {
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errLog.Printf("webhook server on %s: %v", s.addr, err)
		}
	}()
	s.server = srv
	return nil
}

func (s *webhookServer) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// state reports whether every webhook is served (the provider's Deployment
// has Ready pods) and a channel closed on the next change.
func (s *webhookServer) state() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready.Load(), s.changed
}
