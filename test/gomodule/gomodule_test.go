package gomodule

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// A function of a dependency (k8s.io/apimachinery) locates that module.
var anchor = sets.New[string]
var anchorFile = "pkg/util/sets/set.go"

func TestDirFindsTheModuleOfACompiledFunction(t *testing.T) {
	ctx := context.Background()
	dir, version, err := Dir(ctx, "k8s.io/apimachinery", anchor, anchorFile)
	if err != nil {
		t.Fatalf("Dir: %v", err)
	}
	if version == "" {
		t.Errorf("no version")
	}
	if _, err := os.Stat(filepath.Join(dir, anchorFile)); err != nil {
		t.Errorf("the directory %s does not hold %s: %v", dir, anchorFile, err)
	}
	again, err := Download(ctx, "k8s.io/apimachinery", version)
	if err != nil {
		t.Fatalf("Download: %v", err)
	}
	if filepath.Clean(again) != filepath.Clean(dir) {
		t.Errorf("Download named %s, Dir %s", again, dir)
	}
	if _, _, err := Dir(ctx, "example.com/not-this-one", anchor, anchorFile); err == nil {
		t.Errorf("Dir found a module the function does not belong to")
	}
}
