package mover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"

	"github.com/move-operator/move-operator/test/testenv"
)

// The messages clusterctl v1.14's mover logs at its milestones
// (cmd/clusterctl/client/cluster/mover.go), which Clusterctl's timeline
// is made of.
const (
	// ClusterctlPausing: discovery is done, the Clusters are paused next.
	ClusterctlPausing = "Pausing the source cluster"
	// ClusterctlCreating: every object has been read; the creates begin.
	ClusterctlCreating = "Creating objects in the target cluster"
	// ClusterctlDeleting: every object exists in the target.
	ClusterctlDeleting = "Deleting objects from the source cluster"
	// ClusterctlResuming (V(1)): the last object is deleted; the target's
	// ClusterClasses and Clusters are unpaused next.
	ClusterctlResuming = "Resuming the target ClusterClasses"
)

// ClusterctlOrder is clusterctl's milestones, in order.
var ClusterctlOrder = []string{ClusterctlPausing, ClusterctlCreating, ClusterctlDeleting, ClusterctlResuming}

// Clusterctl moves with clusterctl's Go library, as `clusterctl move
// --namespace NS --kubeconfig SOURCE --to-kubeconfig TARGET` does, one
// namespace at a time as the CLI does, with every provider running.
type Clusterctl struct {
	env    *testenv.Env
	client clusterctl.Client
	sink   *milestoneSink
}

// NewClusterctl prepares clusterctl with an empty configuration in dir;
// its log (what the CLI prints by default) goes to dir/clusterctl.log.
// clusterctl's logger is process-wide: use one Clusterctl per process.
func NewClusterctl(ctx context.Context, env *testenv.Env, dir string) (*Clusterctl, error) {
	config := filepath.Join(dir, "clusterctl.yaml")
	if err := os.WriteFile(config, []byte("# clusterctl move needs no configuration\n"), 0o644); err != nil {
		return nil, err
	}
	// The library reads nothing from the network unless asked; this is in
	// case that changes.
	if err := os.Setenv("CLUSTERCTL_DISABLE_VERSIONCHECK", "true"); err != nil {
		return nil, err
	}
	c, err := clusterctl.New(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("creating the clusterctl client: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "clusterctl.log"))
	if err != nil {
		return nil, err
	}
	sink := &milestoneSink{out: logFile}
	clusterctllog.SetLogger(logr.New(sink))
	return &Clusterctl{env: env, client: c, sink: sink}, nil
}

// ClusterctlTimeline returns a timeline of clusterctl's milestones,
// beginning now.
func ClusterctlTimeline() *Timeline { return newTimeline(ClusterctlOrder) }

// Move moves each namespace in turn, as one `clusterctl move --namespace`
// per namespace would (the CLI takes one namespace, or all of them),
// marking the milestones on tl (a new ClusterctlTimeline if nil): the
// first namespace's.
func (c *Clusterctl) Move(ctx context.Context, tl *Timeline, namespaces []string) (*Timeline, error) {
	if tl == nil {
		tl = ClusterctlTimeline()
	}
	c.sink.follow(tl)
	defer c.sink.follow(nil)
	src, tgt := c.env.Source, c.env.Target
	for _, ns := range namespaces {
		err := c.client.Move(ctx, clusterctl.MoveOptions{
			FromKubeconfig: clusterctl.Kubeconfig{Path: src.KubeconfigPath, Context: src.Name},
			ToKubeconfig:   clusterctl.Kubeconfig{Path: tgt.KubeconfigPath, Context: tgt.Name},
			Namespace:      ns,
		})
		if err != nil {
			tl.Ended = time.Now()
			return tl, fmt.Errorf("clusterctl move --namespace %s: %w", ns, err)
		}
	}
	tl.Ended = time.Now()
	return tl, nil
}

// milestoneSink is clusterctl's logger: it writes what the CLI shows by
// default to a file and marks the milestones on the current timeline.
type milestoneSink struct {
	mu  sync.Mutex
	out *os.File
	tl  *Timeline
}

func (s *milestoneSink) follow(tl *Timeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tl = tl
}

func (s *milestoneSink) Init(logr.RuntimeInfo) {}

// Enabled lets V(1) through, where ClusterctlResuming is logged, and
// V(5), where clusterctl says why it retries a request.
func (s *milestoneSink) Enabled(level int) bool { return level <= 1 || level == 5 }

func (s *milestoneSink) Info(level int, msg string, kv ...any) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tl != nil {
		s.tl.observe(msg, now)
	}
	if level == 0 || strings.HasPrefix(msg, "Retrying") {
		fmt.Fprintf(s.out, "%s %s %v\n", now.Format(time.StampMilli), msg, kv)
	}
}

func (s *milestoneSink) Error(err error, msg string, kv ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "%s ERROR %s: %v %v\n", time.Now().Format(time.StampMilli), msg, err, kv)
}

func (s *milestoneSink) WithValues(...any) logr.LogSink { return s }

func (s *milestoneSink) WithName(string) logr.LogSink { return s }
