package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheReportPathIsCheckedBeforeTheRun(t *testing.T) {
	root := t.TempDir()
	elsewhere := t.TempDir()
	notADir := filepath.Join(elsewhere, "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, out, want, fails string
	}{
		{name: "a relative path is taken from the checkout's root",
			out: "docs/benchmarks.md", want: filepath.Join(root, "docs/benchmarks.md")},
		{name: "an absolute path is kept as given",
			out: filepath.Join(elsewhere, "report.md"), want: filepath.Join(elsewhere, "report.md")},
		{name: "the directories an absolute path names are made",
			out: filepath.Join(elsewhere, "new", "dir", "report.md"), want: filepath.Join(elsewhere, "new", "dir", "report.md")},
		{name: "a directory under a file fails at once",
			out: filepath.Join(notADir, "report.md"), fails: "making the directory"},
		{name: "a directory as the report fails at once",
			out: elsewhere, fails: "is a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := reportPath(root, c.out)
			if c.fails != "" {
				if err == nil || !strings.Contains(err.Error(), c.fails) {
					t.Fatalf("reportPath(%q): %q, error %v; want an error saying %q", c.out, got, err, c.fails)
				}
				return
			}
			if err != nil {
				t.Fatalf("reportPath(%q): %v", c.out, err)
			}
			if got != c.want {
				t.Errorf("reportPath(%q) = %q, want %q", c.out, got, c.want)
			}
			// The check writes nothing that stays: the report is not made
			// until the run ends, and no probe is left beside it.
			entries, err := os.ReadDir(filepath.Dir(got))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".write-check-") || e.Name() == filepath.Base(got) {
					t.Errorf("the check left %s in %s", e.Name(), filepath.Dir(got))
				}
			}
		})
	}
}

func TestAnExistingReportIsLeftAsItWasByTheCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(path, []byte("the last run's page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reportPath(dir, path); err != nil {
		t.Fatalf("an existing, writable report: %v", err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "the last run's page\n" {
		t.Errorf("the check changed the report: %q, %v", data, err)
	}
}
