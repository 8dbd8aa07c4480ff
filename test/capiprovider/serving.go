package capiprovider

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// webhookServer serves one provider's webhooks on its Service's ClusterIP,
// port 443, but only while told to: the API server dials the ClusterIP, so a
// closed server yields exactly what a provider scaled to zero yields in a
// real cluster, "connect: connection refused".
type webhookServer struct {
	addr    string
	handler http.Handler
	tls     *tls.Config
	errLog  *log.Logger

	mu     sync.Mutex
	server *http.Server
	// changed is closed and replaced whenever serving starts or stops, so
	// waiters need not poll.
	changed chan struct{}
}

func newWebhookServer(addr string, handler http.Handler, cert tls.Certificate, errLog *log.Logger) *webhookServer {
	return &webhookServer{
		addr:    addr,
		handler: handler,
		// HTTP/1.1 only, as Cluster API serves by default (--enable-http2=false).
		tls:     &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		errLog:  errLog,
		changed: make(chan struct{}),
	}
}

// setServing starts or stops serving. Stopping closes the listener and every
// open connection at once (http.Server.Close, not Shutdown): a pod that goes
// away does not finish its keep-alive connections politely either.
func (s *webhookServer) setServing(on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on == (s.server != nil) {
		return nil
	}
	if !on {
		err := s.server.Close()
		s.server = nil
		s.notify()
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
	s.notify()
	return nil
}

func (s *webhookServer) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// state reports whether the server is serving and a channel closed on the
// next change.
func (s *webhookServer) state() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.server != nil, s.changed
}
