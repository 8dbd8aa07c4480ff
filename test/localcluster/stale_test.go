package localcluster

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestStaleClusterDirectories(t *testing.T) {
	root := t.TempDir()
	mkdir := func(name string, owner func(dir string)) string {
		dir := filepath.Join(root, name)
		for _, sub := range []string{"etcd", "logs"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		owner(dir)
		return dir
	}
	live := mkdir(dirPrefix+"live", func(dir string) {
		if err := writeOwner(dir); err != nil {
			t.Fatal(err)
		}
	})
	dead := mkdir(dirPrefix+"dead", func(dir string) {
		// This process, but started at another time: a reused pid.
		_ = os.WriteFile(filepath.Join(dir, ownerFile), []byte(itoa(os.Getpid())+" 1\n"), 0o644)
	})
	old := mkdir(dirPrefix+"old", func(dir string) {
		_ = os.WriteFile(filepath.Join(dir, ownerFile), []byte("999999999 1\n"), 0o644)
		long := time.Now().Add(-2 * staleLogsKept)
		_ = os.Chtimes(dir, long, long)
	})
	unowned := mkdir(dirPrefix+"unowned", func(string) {})

	removeStaleDirsIn(root)

	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	t.Run("a live owner's directory is left alone", func(t *testing.T) {
		if !exists(filepath.Join(live, "etcd")) {
			t.Error("etcd data of a running cluster removed")
		}
	})
	t.Run("a dead owner's data goes, its logs stay", func(t *testing.T) {
		if exists(filepath.Join(dead, "etcd")) || !exists(filepath.Join(dead, "logs")) {
			t.Error("want etcd removed and logs kept")
		}
	})
	t.Run("a dead owner's old directory goes entirely", func(t *testing.T) {
		if exists(old) {
			t.Error("old directory kept")
		}
	})
	t.Run("a directory without an owner file is not judged", func(t *testing.T) {
		if !exists(filepath.Join(unowned, "etcd")) {
			t.Error("unowned directory touched")
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
