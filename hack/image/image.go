package image

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// DefaultRef is the image name the Makefile uses when IMG is not given.
	DefaultRef = "move-operator:dev"

	// Entrypoint is where the manager binary lives in the image.
	Entrypoint = "/manager"

	// User is distroless's "nonroot" user and group, which the Dockerfile's
	// image runs as and config/manager's securityContext expects.
	User = "65532:65532"
)

// CreationTime is the time stamped on the image and on its file: the
// SOURCE_DATE_EPOCH convention of reproducible builds when set, else the Unix
// epoch, so that the same sources give the same image digest whenever they
// are built.
func CreationTime() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// NewImage makes the manager image for platform p around the binary at
// manager. The binary is read when the image is written, so it must stay in
// place until then.
//
// The base is empty, where the Dockerfile uses gcr.io/distroless/static:nonroot
// (no registry is reachable where this runs, and nothing is pulled). What the
// distroless base adds, and why the manager does without it:
//   - CA certificates: the manager talks only to Kubernetes API servers and
//     trusts them through the CA data in the target's kubeconfig Secret and,
//     in its own cluster, the ServiceAccount's ca.crt. One difference remains:
//     a target kubeconfig without certificate-authority-data, whose API server
//     has a publicly trusted certificate, is trusted by the Dockerfile's image
//     and refused by this one ("certificate signed by unknown authority").
//   - tzdata: the manager loads no time zone by name, and the times it
//     writes to the API are UTC whatever the zone.
//   - /etc/passwd with user 65532 ("nonroot") and /home/nonroot: the user is
//     given by number, Kubernetes needs no name for runAsNonRoot, and nothing
//     in the manager looks a user up or writes a home directory.
//   - /tmp: the manager writes no files; its metrics certificate, when none is
//     mounted, is generated in memory.
func NewImage(manager string, p v1.Platform, created time.Time) (v1.Image, error) {
	info, err := os.Stat(manager)
	if err != nil {
		return nil, fmt.Errorf("reading the manager binary: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("the manager binary %s is not a regular file", manager)
	}
	// The compressed layer is kept in memory once made: it is needed for the
	// digest and again for every write, and gzip is the slow part.
	layer, err := tarball.LayerFromOpener(managerLayer(manager, info.Size(), created), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making the layer of %s: %w", manager, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/image: COPY manager " + Entrypoint,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the manager layer: %w", err)
	}
	base, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	cfg := base.DeepCopy()
	cfg.Created = v1.Time{Time: created}
	cfg.OS = p.OS
	cfg.Architecture = p.Architecture
	cfg.Variant = p.Variant
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "move-operator",
		"org.opencontainers.image.description": "Moves Cluster API management state between management clusters",
		"org.opencontainers.image.source":      "https://github.com/move-operator/move-operator",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the image config: %w", err)
	}
	return img, nil
}

// managerLayer opens the uncompressed layer: a tar stream with one entry,
// the binary at Entrypoint, owned by root and executable by everyone (the
// image runs as 65532, which only needs to read and run it).
func managerLayer(manager string, size int64, created time.Time) tarball.Opener {
	return func() (io.ReadCloser, error) {
		f, err := os.Open(manager)
		if err != nil {
			return nil, fmt.Errorf("opening the manager binary: %w", err)
		}
		pr, pw := io.Pipe()
		go func() {
			defer f.Close()
			tw := tar.NewWriter(pw)
			hdr := &tar.Header{
				Typeflag: tar.TypeReg,
				// Layer paths are relative to the root, without a leading slash.
				Name:    Entrypoint[1:],
				Mode:    0o755,
				Size:    size,
				ModTime: created,
				Format:  tar.FormatPAX,
			}
			err := tw.WriteHeader(hdr)
			if err == nil {
				// CopyN: a binary that changed size since Stat is an error,
				// not a silently truncated layer.
				_, err = io.CopyN(tw, f, size)
			}
			if err == nil {
				err = tw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, nil
	}
}
