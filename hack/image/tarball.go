package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TarballName is the file name of the platform's image tarball, for example
// move-operator-linux-arm64.tar. One tarball per platform: `docker load` and
// `kind load image-archive` given one archive holding two images under the
// same tag would keep whichever came last, not the one for their platform.
func TarballName(p v1.Platform) string {
	name := "move-operator-" + p.OS + "-" + p.Architecture
	if p.Variant != "" {
		name += "-" + p.Variant
	}
	return name + ".tar"
}

// WriteTarballs builds the manager for each platform and writes its image,
// tagged ref, as a docker-save tarball named TarballName in dir. It returns
// the paths written, in the order of platforms. moduleDir is the root of the
// move-operator module.
func WriteTarballs(ctx context.Context, moduleDir, ref string, platforms []v1.Platform, dir string) ([]string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("image name %q is not a tag (registry/repository:tag): %w", ref, err)
	}
	created, err := CreationTime()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the image directory: %w", err)
	}
	// The binaries are needed only until their tarball is written.
	work, err := os.MkdirTemp("", "move-operator-image-")
	if err != nil {
		return nil, fmt.Errorf("creating a build directory: %w", err)
	}
	defer os.RemoveAll(work)

	var paths []string
	for _, p := range platforms {
		bin := filepath.Join(work, "manager-"+p.OS+"-"+p.Architecture)
		if err := BuildManager(ctx, moduleDir, p, bin); err != nil {
			return nil, err
		}
		img, err := NewImage(bin, p, created)
		if err != nil {
			return nil, fmt.Errorf("making the %s image: %w", p.String(), err)
		}
		dest := filepath.Join(dir, TarballName(p))
		if err := writeTarball(dest, tag, img); err != nil {
			return nil, err
		}
		paths = append(paths, dest)
	}
	return paths, nil
}

// writeTarball writes img to dest through a temporary file renamed into
// place, so that a reader (another test package extracting the manager)
// never sees half a tarball.
func writeTarball(dest string, tag name.Tag, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("creating %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the image tarball %s: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the image tarball %s: %w", dest, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing the image tarball %s: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("moving the image tarball into place: %w", err)
	}
	return nil
}

// LoadTarball reads the single image of a tarball written by WriteTarballs.
// The file is opened once and read through that handle, so a tarball
// replaced meanwhile by a concurrent build cannot mix two images. Close the
// returned closer when done with the image.
func LoadTarball(tarballPath string) (v1.Image, io.Closer, error) {
	f, err := os.Open(tarballPath)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the image tarball: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("reading the image tarball %s: %w", tarballPath, err)
	}
	opener := func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(f, 0, info.Size())), nil
	}
	img, err := tarball.Image(opener, nil)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("reading the image in %s: %w", tarballPath, err)
	}
	return img, f, nil
}

// ExtractManager copies the entrypoint binary of the image in tarballPath to
// destPath (mode 0755), so that a test runs exactly the binary the image
// ships.
func ExtractManager(tarballPath, destPath string) error {
	img, closer, err := LoadTarball(tarballPath)
	if err != nil {
		return err
	}
	defer closer.Close()
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("reading the image config in %s: %w", tarballPath, err)
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return fmt.Errorf("the image in %s has no entrypoint", tarballPath)
	}
	entrypoint := cfg.Config.Entrypoint[0]

	// The flattened filesystem, as a container would see it.
	fs := mutate.Extract(img)
	defer fs.Close()
	tr := tar.NewReader(fs)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the image in %s has no file %s, its entrypoint", tarballPath, entrypoint)
		}
		if err != nil {
			return fmt.Errorf("reading the files of the image in %s: %w", tarballPath, err)
		}
		if path.Clean("/"+hdr.Name) != entrypoint {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("the entrypoint %s of the image in %s is not a regular file", entrypoint, tarballPath)
		}
		return writeExecutable(destPath, tr)
	}
}

// writeExecutable writes r to destPath through a temporary file, so that a
// binary being run is never overwritten in place ("text file busy").
func writeExecutable(destPath string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(destPath), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", destPath, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(destPath), "."+filepath.Base(destPath)+".*")
	if err != nil {
		return fmt.Errorf("creating %s: %w", destPath, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", destPath, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", destPath, err)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return fmt.Errorf("making %s executable: %w", destPath, err)
	}
	if err := os.Rename(tmp.Name(), destPath); err != nil {
		return fmt.Errorf("moving %s into place: %w", destPath, err)
	}
	return nil
}
