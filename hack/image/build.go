package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultPlatforms are the platforms `make image` builds unless told
// otherwise: the two a management cluster runs on in practice.
const DefaultPlatforms = "linux/amd64,linux/arm64"

// ParsePlatforms reads a comma-separated list such as "linux/amd64,linux/arm64".
// Only linux is accepted: the image has no other use, and a typo such as
// "linux/amd46" is better refused here than by the Go toolchain minutes later.
func ParsePlatforms(list string) ([]v1.Platform, error) {
	var out []v1.Platform
	seen := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return nil, fmt.Errorf("parsing platform %q: %w", s, err)
		}
		if p.OS != "linux" {
			return nil, fmt.Errorf("platform %q: the manager image is built for linux only", s)
		}
		if p.Architecture != "amd64" && p.Architecture != "arm64" {
			return nil, fmt.Errorf("platform %q: architecture %q is not one the manager is built for (amd64, arm64)", s, p.Architecture)
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("platform %q is listed twice", s)
		}
		seen[p.String()] = true
		out = append(out, *p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", list)
	}
	return out, nil
}

// BuildFlags are the `go build` arguments of the Dockerfile's builder stage;
// a test compares them with the Dockerfile so the two cannot drift apart.
// -s -w drop the symbol table and DWARF (a smaller image; stack traces keep
// their function names). -buildvcs=false because the Docker build context
// holds no .git, so a binary built here must not stamp VCS data either.
var BuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// BuildManager compiles the manager (the module's root package) for one
// platform into out. moduleDir is the root of the move-operator module.
func BuildManager(ctx context.Context, moduleDir string, p v1.Platform, out string) error {
	args := append([]string{"build"}, BuildFlags...)
	args = append(args, "-o", out, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(),
		// Static: the image has no libc to link against.
		"CGO_ENABLED=0",
		"GOOS="+p.OS,
		"GOARCH="+p.Architecture,
		// The baseline instruction sets, as in the Dockerfile's build: a
		// GOAMD64=v3 left in a developer's environment would otherwise make
		// an image that crashes on older nodes.
		"GOAMD64=v1",
		"GOARM64=v8.0",
	)
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the manager for %s: %w\n%s", p.String(), err, stderr.String())
	}
	return nil
}
