package capiprovider

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
)

// A webhook server whose port is taken must not report its webhooks
// served: WaitServing(true) would go on with nothing listening.
func TestAServerThatCannotListenIsNotReportedServing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	s := newWebhookServer(taken.Addr().String(), http.NotFoundHandler(), tls.Certificate{}, log.New(io.Discard, "", 0))
	if err := s.setServing(true); err == nil {
		t.Fatal("serving on a taken port succeeded")
	}
	if on, _ := s.state(); on {
		t.Error("the webhooks are reported served while nothing listens")
	}
}
