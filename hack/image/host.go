package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageDirEnv names the environment variable that points the tests at a
// directory of tarballs made by `make image`, so that they test the very
// files to be shipped.
const ImageDirEnv = "MOVE_OPERATOR_IMAGE_DIR"

const modulePath = "github.com/move-operator/move-operator"

// HostPlatform is the image platform whose binary runs on this machine.
func HostPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// HostTarball returns the path of the host platform's image tarball.
//
// With MOVE_OPERATOR_IMAGE_DIR set, it is the tarball in that directory,
// built there only when absent. Without it, the tarball in <module>/bin/image
// is built again on every call: with a warm build cache this costs seconds
// and gives the same bytes when nothing changed, and a test never runs the
// binary of an older checkout. The rebuilt tarball keeps the tag of the one it
// replaces (what `make image IMG=...` chose), else DefaultRef.
func HostTarball() (string, error) {
	p := HostPlatform()
	dir := os.Getenv(ImageDirEnv)
	if dir != "" {
		path := filepath.Join(dir, TarballName(p))
		if _, err := os.Stat(path); err == nil {
			return path, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("reading %s (from %s): %w", path, ImageDirEnv, err)
		}
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	if dir == "" {
		dir = filepath.Join(root, "bin", "image")
	}
	path := filepath.Join(dir, TarballName(p))
	ref, err := existingTag(path)
	if err != nil {
		return "", err
	}
	if _, err := WriteTarballs(context.Background(), root, ref, []v1.Platform{p}, dir); err != nil {
		return "", err
	}
	return path, nil
}

// existingTag is the tag of the tarball at path, DefaultRef when there is
// none.
func existingTag(path string) (string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultRef, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the tag of %s: %w", path, err)
	}
	if len(m) == 1 && len(m[0].RepoTags) == 1 {
		return m[0].RepoTags[0], nil
	}
	return DefaultRef, nil
}

// ModuleRoot finds the root of the move-operator module from the working
// directory (a test runs in its package's directory).
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of %s in %s or above it", modulePath, wd)
		}
	}
}

// declaresModule reports whether the go.mod at path is move-operator's own,
// not that of a throwaway module nested somewhere below it.
func declaresModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}
