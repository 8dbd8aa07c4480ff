//go:build cluster

package movetest

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/snapshot"
)

// RollbackCase prepares a small fleet, records both clusters, and checks
// after a failed move that both are as they were.
type RollbackCase struct {
	t           *testing.T
	Fleet       *fleet.Fleet
	Ops         string
	StateBefore ClusterState
	Before      *snapshot.Snapshot
}

// NewRollbackCase creates a fleet of one cluster in a namespace named after
// prefix, and the namespace of the MoveOperation, and records both clusters.
func NewRollbackCase(t *testing.T, prefix string) *RollbackCase {
	EnsureSetup(t)
	ctx := context.Background()
	g := NewWithT(t)
	name := prefix + rand.String(4)
	f := CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{name}, Name: name})
	return &RollbackCase{
		t: t, Fleet: f, Ops: OpsNamespace(t),
		StateBefore: StateOf(ctx, g),
		Before:      InNamespaces(Take(ctx, g, Env.Source, f.Namespaces), f.Namespaces...),
	}
}

// AssertRolledBack checks the failure is reported with its reason and both
// clusters are back as they were; extra lists objects of the source the
// comparison leaves out (created or deleted during the move by somebody
// else).
func (rc *RollbackCase) AssertRolledBack(mo *movev1alpha1.MoveOperation, reason string, extra ...snapshot.Key) {
	t := rc.t
	g := NewWithT(t)
	ctx := context.Background()
	failed, _ := WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 3*time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(reason))
	g.Expect(failed.Status.FailureMessage).NotTo(BeEmpty())
	g.Expect(KstatusOf(g, failed)).To(Equal(status.FailedStatus))
	stalled := meta.FindStatusCondition(failed.Status.Conditions, movev1alpha1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Reason).To(Equal(reason))

	after := InNamespaces(Take(ctx, g, Env.Source, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(without(rc.Before, extra), without(after, extra)); diff != "" {
		t.Fatalf("the source is not as it was before the move:\n%s", diff)
	}
	for _, o := range InNamespaces(Take(ctx, g, Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...).Objects {
		if o.Kind != "Secret" {
			t.Errorf("%s is left in the target after the rollback", o.Key())
		}
	}
	g.Expect(StateOf(ctx, g)).To(Equal(rc.StateBefore), "controllers and webhooks must be as before")
	AssertNoMoveMarks(ctx, g, Env.Source.Client, rc.Fleet.Namespaces)
	AssertNoMoveMarks(ctx, g, Env.Target.Client, rc.Fleet.Namespaces)
}

// AssertAsBefore checks that a move that did not happen left both clusters
// as they were: the source's objects, nothing in the target, controllers and
// webhooks, no pauses.
func (rc *RollbackCase) AssertAsBefore(ctx context.Context, g Gomega) {
	after := InNamespaces(Take(ctx, g, Env.Source, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		rc.t.Fatalf("the source is not as it was before the move:\n%s", diff)
	}
	g.Expect(InNamespaces(Take(ctx, g, Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...).Objects).To(BeEmpty())
	g.Expect(StateOf(ctx, g)).To(Equal(rc.StateBefore), "controllers and webhooks must be as before")
	AssertNoMoveMarks(ctx, g, Env.Source.Client, rc.Fleet.Namespaces)
}

// without returns the objects of s but those of keys.
func without(s *snapshot.Snapshot, keys []snapshot.Key) *snapshot.Snapshot {
	out := &snapshot.Snapshot{}
	for _, o := range s.Objects {
		if !contains(keyStrings(keys), o.Key().String()) {
			out.Objects = append(out.Objects, o)
		}
	}
	return out
}

func keyStrings(keys []snapshot.Key) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.String())
	}
	return out
}

// TargetViaProxy puts a proxy between the operator and the target, and in ns
// a Secret "via-proxy" whose kubeconfig goes through it: proxy.cut takes the
// target away.
func TargetViaProxy(t *testing.T, ns string) *TCPProxy {
	proxy := StartProxy(t, Env.Target.Config.Host)
	kubeconfig := strings.Replace(string(TargetKubeconfig), proxy.Upstream, proxy.Addr, 1)
	NewSecret(t, ns, "via-proxy", map[string][]byte{"value": []byte(kubeconfig)})
	return proxy
}

// TCPProxy forwards a local port to the target API server, and can be cut
// (connections refused, open ones closed) and restored, as a network that
// fails would.
type TCPProxy struct {
	Addr     string
	Upstream string
	mu       sync.Mutex
	ln       net.Listener
	conns    []net.Conn
	Cuts     atomic.Int64
}

// StartProxy starts a TCPProxy to the API server at upstreamURL, cut when
// the test ends.
func StartProxy(t *testing.T, upstreamURL string) *TCPProxy {
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Upstream: u.Host}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

func (p *TCPProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.Upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.Cuts.Add(1)
	_ = p.ln.Close()
	p.ln = nil
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *TCPProxy) Restore() {
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		panic(err)
	}
	p.serve(ln)
}

// SourceReplicas keeps the source cluster's replica counts of a state.
func SourceReplicas(st ClusterState) map[string]int32 {
	out := map[string]int32{}
	for k, v := range st.Replicas {
		if strings.HasPrefix(k, Env.Source.Name+" ") {
			out[k] = v
		}
	}
	return out
}

// FailCopyAfter is the write of Copying after which the target refuses
// every create: part of the fleet is in the target when the move fails, so
// the rollback has real work in both clusters.
const FailCopyAfter = 20
