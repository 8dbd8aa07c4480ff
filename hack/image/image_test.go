package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testRef is the tag the tests build with: not DefaultRef, so a tarball that
// ignored the requested name would be caught.
const testRef = "registry.example/move-operator:test"

var bothPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

var built struct {
	once sync.Once
	dir  string
	ref  string
	err  error
}

// builtTarballs returns the directory holding both platforms' tarballs and
// the tag they carry: those of `make image` when MOVE_OPERATOR_IMAGE_DIR is
// set (tagged $IMG, else DefaultRef), else tarballs built once for this test
// run. A cold arm64 cross-build takes minutes on a small machine; the Go
// build cache makes the next runs fast.
func builtTarballs(t *testing.T) (dir, ref string) {
	t.Helper()
	built.once.Do(func() {
		if dir := os.Getenv(ImageDirEnv); dir != "" {
			built.dir, built.ref = dir, DefaultRef
			if img := os.Getenv("IMG"); img != "" {
				built.ref = img
			}
			return
		}
		root, err := ModuleRoot()
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.err = os.MkdirTemp("", "move-operator-image-test-")
		if built.err != nil {
			return
		}
		built.ref = testRef
		_, built.err = WriteTarballs(context.Background(), root, testRef, bothPlatforms, built.dir)
	})
	if built.err != nil {
		t.Fatalf("building the images: %v", built.err)
	}
	return built.dir, built.ref
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" && os.Getenv(ImageDirEnv) == "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func TestEachPlatformsTarballHoldsTheManagerImage(t *testing.T) {
	dir, ref := builtTarballs(t)
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bothPlatforms {
		t.Run("the "+p.String()+" tarball", func(t *testing.T) {
			file := filepath.Join(dir, TarballName(p))
			img, err := tarball.ImageFromPath(file, &tag)
			if err != nil {
				t.Fatalf("loading %s under the tag %s: %v", file, ref, err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}

			t.Run("runs /manager as user 65532 from /", func(t *testing.T) {
				got := []string{strings.Join(cfg.Config.Entrypoint, " "), cfg.Config.User, cfg.Config.WorkingDir}
				want := []string{"/manager", "65532:65532", "/"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("entrypoint, user, working directory (-want +got):\n%s", diff)
				}
				if len(cfg.Config.Cmd) != 0 {
					t.Errorf("the image has a Cmd %q that would become the manager's arguments", cfg.Config.Cmd)
				}
			})

			t.Run("is for its own platform", func(t *testing.T) {
				if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
					t.Errorf("config says %s/%s, want %s", cfg.OS, cfg.Architecture, p.String())
				}
			})

			t.Run("has one layer holding only /manager, mode 0755", func(t *testing.T) {
				layers, err := img.Layers()
				if err != nil {
					t.Fatal(err)
				}
				if len(layers) != 1 {
					t.Fatalf("the image has %d layers, want 1", len(layers))
				}
				files := layerFiles(t, layers[0])
				want := []string{"/manager -rwxr-xr-x 0:0"}
				if diff := cmp.Diff(want, files); diff != "" {
					t.Errorf("files of the layer (-want +got):\n%s", diff)
				}
			})

			t.Run("holds a static binary for its architecture", func(t *testing.T) {
				bin := filepath.Join(t.TempDir(), "manager")
				if err := ExtractManager(file, bin); err != nil {
					t.Fatal(err)
				}
				checkStaticELF(t, bin, p.Architecture)
			})
		})
	}
}

// layerFiles lists a layer's entries as "path mode uid:gid".
func layerFiles(t *testing.T, l v1.Layer) []string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the layer: %v", err)
		}
		out = append(out, fmt.Sprintf("%s %s %d:%d", path.Clean("/"+hdr.Name), hdr.FileInfo().Mode(), hdr.Uid, hdr.Gid))
	}
}

var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStaticELF fails unless bin is a Linux ELF for arch that needs no
// dynamic loader: the image has no libc and no ld.so.
func checkStaticELF(t *testing.T, bin, arch string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", bin, err)
	}
	defer f.Close()
	if f.Machine != elfMachines[arch] {
		t.Errorf("the binary is for %s, want %s (%s)", f.Machine, elfMachines[arch], arch)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("the binary asks for a dynamic loader (PT_INTERP): it was not built with CGO_ENABLED=0")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
}

func TestTheHostsManagerComesOutOfItsImageAndRuns(t *testing.T) {
	dir, _ := builtTarballs(t)
	if runtime.GOOS != "linux" || elfMachines[runtime.GOARCH] == 0 {
		t.Skipf("the image's binary cannot run on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	t.Setenv(ImageDirEnv, dir)
	file, err := HostTarball()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, TarballName(HostPlatform())); file != want {
		t.Fatalf("HostTarball with %s=%s returned %s, want %s", ImageDirEnv, dir, file, want)
	}
	bin := filepath.Join(t.TempDir(), "manager")
	if err := ExtractManager(file, bin); err != nil {
		t.Fatal(err)
	}
	checkStaticELF(t, bin, runtime.GOARCH)

	t.Run("a directory without the tarball gets it built", func(t *testing.T) {
		empty := t.TempDir()
		t.Setenv(ImageDirEnv, empty)
		file, err := HostTarball()
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(DefaultRef)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tarball.ImageFromPath(filepath.Join(empty, TarballName(HostPlatform())), &tag); err != nil {
			t.Errorf("HostTarball returned %s, but no %s image is there: %v", file, DefaultRef, err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	// A flag of the manager's own, so that any binary that merely exits 0
	// on --help would not pass.
	if !bytes.Contains(out, []byte("leader-elect")) {
		t.Errorf("%s --help does not describe the manager's flags:\n%s", bin, out)
	}
}

func TestPushSendsOneIndexOfBothPlatforms(t *testing.T) {
	dir, ref := builtTarballs(t)
	// No credentials from the developer's machine.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := httptest.NewServer(registry.New(registry.Logger(stdlog.New(testLog{t}, "registry: ", 0))))
	defer reg.Close()
	target := strings.TrimPrefix(reg.URL, "http://") + "/move-operator/manager:v0.0.1"

	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	var images []v1.Image
	want := map[string]v1.Hash{}
	for _, p := range bothPlatforms {
		img, err := tarball.ImageFromPath(filepath.Join(dir, TarballName(p)), &tag)
		if err != nil {
			t.Fatal(err)
		}
		digest, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
		want[p.String()] = digest
	}

	if err := Push(context.Background(), target, images); err != nil {
		t.Fatal(err)
	}

	pushed, err := name.NewTag(target)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(pushed)
	if err != nil {
		t.Fatalf("reading the pushed index back: %v", err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]v1.Hash{}
	for _, d := range manifest.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		got[d.Platform.String()] = d.Digest
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("index entries, platform to manifest digest (-tarballs +pushed):\n%s", diff)
	}
	// Each entry must resolve to a whole image in the registry, blobs
	// included, not only to a manifest.
	for plat, digest := range got {
		img, err := remote.Image(pushed.Context().Digest(digest.String()))
		if err != nil {
			t.Fatalf("pulling the %s image: %v", plat, err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatalf("pulling a layer of the %s image: %v", plat, err)
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				t.Fatalf("pulling a layer of the %s image: %v", plat, err)
			}
		}
	}
}

// testLog sends the registry's request log to the test's, shown on failure
// only.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestTheDockerfileBuildsTheSameBinary(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, so that a RUN spread over several reads as one.
	dockerfile := strings.ReplaceAll(string(data), "\\\n", " ")
	build := regexp.MustCompile(`(?m)^RUN .*\bgo build\b.*$`).FindString(dockerfile)
	if build == "" {
		t.Fatal("the Dockerfile has no RUN ... go build line")
	}
	words := shellWords(strings.TrimPrefix(build, "RUN "))
	goAt := slices.Index(words, "go")
	outAt := slices.Index(words, "-o")
	if goAt < 0 || outAt < goAt {
		t.Fatalf("cannot read the Dockerfile's build %q as env... go build flags... -o manager .", build)
	}
	if !slices.Contains(words[:goAt], "CGO_ENABLED=0") {
		t.Errorf("the Dockerfile's build %q does not set CGO_ENABLED=0", build)
	}
	if diff := cmp.Diff(sorted(BuildFlags), sorted(words[goAt+2:outAt])); diff != "" {
		t.Errorf("go build flags (-make image +Dockerfile):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-o", "manager", "."}, words[outAt:]); diff != "" {
		t.Errorf("what the Dockerfile builds (-want +got):\n%s", diff)
	}
	for _, want := range []string{`ENTRYPOINT ["` + Entrypoint + `"]`, "USER " + User} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("the Dockerfile lacks %q, which the image of make image has", want)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// shellWords splits a command line as a shell would for the quoting a
// Dockerfile uses: words separated by blanks, double quotes grouping.
func shellWords(line string) []string {
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			inWord = true
		case !quoted && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}
