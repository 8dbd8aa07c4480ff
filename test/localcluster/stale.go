package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// A test binary killed outright (kill -9, a CI timeout) takes its clusters'
// processes with it but cannot remove their directories, and etcd's data is
// over a hundred megabytes. Each directory Start creates records its owner
// process; the next Start in any process removes the data of directories
// whose owner is gone, keeping their logs a day for whoever investigates.

const (
	dirPrefix     = "move-operator-"
	ownerFile     = "owner"
	staleLogsKept = 24 * time.Hour
)

var staleOnce sync.Once

// writeOwner records this process as the owner of dir.
func writeOwner(dir string) error {
	start, err := processStart(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprintf("%d %s\n", os.Getpid(), start)), 0o644)
}

// processStart returns the start time of a process in clock ticks since boot,
// which tells a live owner from a later process that reuses its pid.
func processStart(pid int) (string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	const startTimeField = 19 // field 22 of proc(5), counted from field 3
	if len(fields) <= startTimeField {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return fields[startTimeField], nil
}

func ownerAlive(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return true // not ours to judge
	}
	var pid int
	var start string
	if _, err := fmt.Sscanf(string(data), "%d %s", &pid, &start); err != nil {
		return true
	}
	current, err := processStart(pid)
	return err == nil && current == start
}

// removeStaleDirs cleans up, once per process, after cluster directories
// whose owner died.
func removeStaleDirs() {
	staleOnce.Do(func() { removeStaleDirsIn(os.TempDir()) })
}

func removeStaleDirsIn(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if ownerAlive(dir) {
			continue
		}
		info, err := e.Info()
		if err == nil && time.Since(info.ModTime()) > staleLogsKept {
			_ = os.RemoveAll(dir)
			continue
		}
		for _, name := range []string{"bin", "etcd", "pki"} {
			_ = os.RemoveAll(filepath.Join(dir, name))
		}
	}
}
