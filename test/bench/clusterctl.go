package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
)

// The messages clusterctl v1.14's mover logs around its copy and delete
// loops (cmd/clusterctl/client/cluster/mover.go). Everything before the first
// is discovery, preflight checks and pausing; everything after the last is
// unpausing in the target.
const (
	msgCreating = "Creating objects in the target cluster"
	msgDeleting = "Deleting objects from the source cluster"
	// Logged at V(1) once the last object is deleted.
	msgResuming = "Resuming the target ClusterClasses"
)

// clusterctlMover moves a fleet's namespace with clusterctl's library, as
// `clusterctl move --namespace NS --kubeconfig SOURCE --to-kubeconfig
// TARGET` does, with every provider Deployment running.
type clusterctlMover struct {
	b      *bench
	f      benchFleet
	client clusterctl.Client
}

func (m *clusterctlMover) prepare(ctx context.Context) ([]component, error) {
	// An empty configuration file: clusterctl reads nothing from the user's
	// home and needs no network (the version check is the CLI's, not the
	// library's; the env variable is there in case that ever changes).
	config := filepath.Join(m.b.workDir, "clusterctl.yaml")
	if err := os.WriteFile(config, []byte("# clusterctl move needs no configuration\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.Setenv("CLUSTERCTL_DISABLE_VERSIONCHECK", "true"); err != nil {
		return nil, err
	}
	c, err := clusterctl.New(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("creating the clusterctl client: %w", err)
	}
	m.client = c
	m.b.marks.reset()
	return nil, nil
}

// move times the whole Move call. Its copy+delete part runs from the log
// line announcing the creates to the one that follows the last delete: what
// comes before is discovery, the provisioning checks and pausing, what
// comes after is unpausing in the target.
func (m *clusterctlMover) move(ctx context.Context, r *result) error {
	src, tgt := m.b.clusters.env.Source, m.b.clusters.env.Target
	began := time.Now()
	err := m.client.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: src.KubeconfigPath, Context: src.Name},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: tgt.KubeconfigPath, Context: tgt.Name},
		Namespace:      m.f.namespace,
	})
	ended := time.Now()
	if err != nil {
		return fmt.Errorf("clusterctl move --namespace %s: %w", m.f.namespace, err)
	}
	r.whole = ended.Sub(began)
	creating, deleting, resuming := m.b.marks.at(msgCreating), m.b.marks.at(msgDeleting), m.b.marks.at(msgResuming)
	if creating.IsZero() || deleting.IsZero() || resuming.IsZero() {
		return fmt.Errorf("clusterctl did not log %q, %q and %q: this bench reads its copy and delete times from them", msgCreating, msgDeleting, msgResuming)
	}
	r.copy, r.delete, r.copyDelete = deleting.Sub(creating), resuming.Sub(deleting), resuming.Sub(creating)
	return nil
}

func (m *clusterctlMover) finish(context.Context, *result) error { return nil }

// markSink is clusterctl's logger: it records when the milestone messages
// were logged, and writes the level 0 messages (what the CLI shows by
// default) to a file. It formats nothing else, so that logging costs
// clusterctl no more than its CLI's default verbosity does.
type markSink struct {
	mu    sync.Mutex
	out   *bufio.Writer
	file  *os.File
	marks map[string]time.Time
}

func newMarkSink(path string) (*markSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s := &markSink{file: f, out: bufio.NewWriter(f), marks: map[string]time.Time{}}
	clusterctllog.SetLogger(logr.New(s))
	return s, nil
}

func (s *markSink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = map[string]time.Time{}
	_ = s.out.Flush()
}

// close flushes the log file and closes it.
func (s *markSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.out.Flush(), s.file.Close())
}

// at returns when msg was first logged since the last reset.
func (s *markSink) at(msg string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[msg]
}

func (s *markSink) Init(logr.RuntimeInfo) {}

// Enabled lets through V(1), where msgResuming is logged.
func (s *markSink) Enabled(level int) bool { return level <= 1 }

func (s *markSink) Info(level int, msg string, kv ...any) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	milestone := false
	switch msg {
	case msgCreating, msgDeleting, msgResuming:
		milestone = true
		if _, ok := s.marks[msg]; !ok {
			s.marks[msg] = now
		}
	}
	if level == 0 || milestone {
		fmt.Fprintf(s.out, "%s %s %v\n", now.Format(time.StampMilli), msg, kv)
	}
}

func (s *markSink) Error(err error, msg string, kv ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "%s ERROR %s: %v %v\n", time.Now().Format(time.StampMilli), msg, err, kv)
}

func (s *markSink) WithValues(...any) logr.LogSink { return s }

func (s *markSink) WithName(string) logr.LogSink { return s }
