package mover

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	log    *ClusterctlLog
}

// NewClusterctl prepares clusterctl with an empty configuration in dir;
// its log (what the CLI prints by default) goes to dir/clusterctl.log.
// clusterctl's logger is process-wide: use one Clusterctl per process.
func NewClusterctl(ctx context.Context, env *testenv.Env, dir string) (*Clusterctl, error) {
	c, err := NewClusterctlClient(ctx, dir)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "clusterctl.log"))
	if err != nil {
		return nil, err
	}
	return &Clusterctl{env: env, client: c, log: NewClusterctlLog(logFile)}, nil
}

// NewClusterctlClient returns a client of clusterctl's library with an
// empty configuration, written to dir/clusterctl.yaml: clusterctl reads
// nothing from the user's home and needs no network.
func NewClusterctlClient(ctx context.Context, dir string) (clusterctl.Client, error) {
	config := filepath.Join(dir, "clusterctl.yaml")
	if err := os.WriteFile(config, []byte("# clusterctl move needs no configuration\n"), 0o644); err != nil {
		return nil, err
	}
	// The version check is the CLI's, not the library's; this is in case
	// that changes.
	if err := os.Setenv("CLUSTERCTL_DISABLE_VERSIONCHECK", "true"); err != nil {
		return nil, err
	}
	c, err := clusterctl.New(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("creating the clusterctl client: %w", err)
	}
	return c, nil
}

// Client is clusterctl's library client, for a caller that moves other
// than the Env's pair (to or from a directory).
func (c *Clusterctl) Client() clusterctl.Client { return c.client }

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
	c.log.Follow(tl)
	defer c.log.Follow(nil)
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

// ClusterctlLog is clusterctl's logger. It marks clusterctl's milestones
// on the timeline it follows, and writes to its writer what the CLI shows
// by default, the milestones and the reasons clusterctl retries a request.
// It formats nothing else, so that logging costs clusterctl no more than
// its CLI's default verbosity does.
type ClusterctlLog struct {
	mu  sync.Mutex
	out io.Writer
	tl  *Timeline
}

// NewClusterctlLog makes clusterctl log to out from now on. clusterctl's
// logger is process-wide: use one ClusterctlLog per process.
func NewClusterctlLog(out io.Writer) *ClusterctlLog {
	l := &ClusterctlLog{out: out}
	clusterctllog.SetLogger(logr.New(l))
	return l
}

// Follow marks the milestones on tl from now on; on none if tl is nil.
func (l *ClusterctlLog) Follow(tl *Timeline) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tl = tl
}

// Flush writes out what the writer holds back, if it buffers.
func (l *ClusterctlLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.out.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// Init implements logr.LogSink.
func (l *ClusterctlLog) Init(logr.RuntimeInfo) {}

// Enabled lets V(1) through, where ClusterctlPausing and
// ClusterctlResuming are logged, and V(5), where clusterctl says why it
// retries a request.
func (l *ClusterctlLog) Enabled(level int) bool { return level <= 1 || level == 5 }

// Info implements logr.LogSink.
func (l *ClusterctlLog) Info(level int, msg string, kv ...any) {
	now := time.Now()
	retry := strings.HasPrefix(msg, "Retrying")
	if level > 1 && !retry {
		return // V(5) is let through for the retries only.
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tl != nil {
		l.tl.observe(msg, now)
	}
	if level == 0 || retry || slices.Contains(ClusterctlOrder, msg) {
		fmt.Fprintf(l.out, "%s %s %v\n", now.Format(time.StampMilli), msg, kv)
	}
}

// Error implements logr.LogSink.
func (l *ClusterctlLog) Error(err error, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "%s ERROR %s: %v %v\n", time.Now().Format(time.StampMilli), msg, err, kv)
}

// WithValues implements logr.LogSink; clusterctl's values are dropped.
func (l *ClusterctlLog) WithValues(...any) logr.LogSink { return l }

// WithName implements logr.LogSink; clusterctl's names are dropped.
func (l *ClusterctlLog) WithName(string) logr.LogSink { return l }
