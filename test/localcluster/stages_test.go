package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAPodStartLatencyDelaysKwoksPodReadyStageOnly(t *testing.T) {
	binDir, clusterDir := t.TempDir(), t.TempDir()
	shared := "---\nkind: Stage\nmetadata:\n  name: pod-complete\nspec:\n  resourceRef: {}\n---\nkind: Stage\nmetadata:\n  name: pod-ready\nspec:\n  resourceRef: {}\n"
	if err := os.WriteFile(filepath.Join(binDir, kwokStagesFile), []byte(shared), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: clusterDir}

	path, err := c.podStartStages(binDir, 0)
	if err != nil || path != filepath.Join(binDir, kwokStagesFile) {
		t.Errorf("without a latency the shared stages are used: %s, %v", path, err)
	}

	path, err = c.podStartStages(binDir, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != clusterDir {
		t.Errorf("the delayed stages are written in the cluster's directory, not %s", path)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "  name: pod-ready\nspec:\n  delay:\n    durationMilliseconds: 4000\n  resourceRef: {}\n"
	if !strings.HasSuffix(string(got), want) || strings.Count(string(got), "delay:") != 1 {
		t.Errorf("only pod-ready waits 4 s:\n%s", got)
	}

	if err := os.WriteFile(filepath.Join(binDir, kwokStagesFile), []byte("---\nkind: Stage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.podStartStages(binDir, time.Second); err == nil || !strings.Contains(err.Error(), "no pod-ready stage") {
		t.Errorf("stages without pod-ready are an error that says so: %v", err)
	}
}
