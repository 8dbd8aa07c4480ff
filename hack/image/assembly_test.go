package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// These tests assemble images around a small stand-in binary: they check
// what this package decides, in milliseconds, without compiling the manager.

func TestParsePlatforms(t *testing.T) {
	tests := []struct {
		name  string
		list  string
		want  []string
		error string
	}{
		{name: "the default list gives amd64 and arm64", list: DefaultPlatforms, want: []string{"linux/amd64", "linux/arm64"}},
		{name: "one platform narrows the build", list: "linux/arm64", want: []string{"linux/arm64"}},
		{name: "blanks and empty items are ignored", list: " linux/amd64 ,, ", want: []string{"linux/amd64"}},
		{name: "another OS is refused", list: "darwin/arm64", error: "linux only"},
		{name: "a misspelt architecture is refused", list: "linux/amd46", error: "not one the manager is built for"},
		{name: "a platform listed twice is refused", list: "linux/amd64,linux/amd64", error: "listed twice"},
		{name: "an empty list is refused", list: "", error: "no platform"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePlatforms(tt.list)
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("ParsePlatforms(%q) error = %v, want one saying %q", tt.list, err, tt.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.String())
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("ParsePlatforms(%q) (-want +got):\n%s", tt.list, diff)
			}
		})
	}
}

func TestCreationTime(t *testing.T) {
	tests := []struct {
		name     string
		epoch    string
		want     time.Time
		failsFor bool
	}{
		{name: "without SOURCE_DATE_EPOCH it is the Unix epoch", epoch: "", want: time.Unix(0, 0).UTC()},
		{name: "SOURCE_DATE_EPOCH sets it", epoch: "1700000000", want: time.Unix(1700000000, 0).UTC()},
		{name: "a SOURCE_DATE_EPOCH that is not a number is refused", epoch: "yesterday", failsFor: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SOURCE_DATE_EPOCH", tt.epoch)
			got, err := CreationTime()
			if tt.failsFor {
				if err == nil {
					t.Fatalf("CreationTime() = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("CreationTime() = %v, want %v", got, tt.want)
			}
		})
	}
}

// standIn writes a small file to stand for the manager binary.
func standIn(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTheImageIsReproducible(t *testing.T) {
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 := v1.Platform{OS: "linux", Architecture: "arm64"}
	epoch := time.Unix(0, 0).UTC()
	bin := standIn(t, "binary one")

	first, err := NewImage(bin, amd64, epoch)
	if err != nil {
		t.Fatal(err)
	}
	// A later build of the same binary, from a file with another mtime.
	if err := os.Chtimes(bin, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	again, err := NewImage(bin, amd64, epoch)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the same binary and time give the same digest", func(t *testing.T) {
		if a, b := digest(t, first), digest(t, again); a != b {
			t.Errorf("two builds of one binary differ: %s and %s", a, b)
		}
	})

	others := []struct {
		name  string
		bin   string
		p     v1.Platform
		creat time.Time
	}{
		{name: "another creation time gives another digest", bin: bin, p: amd64, creat: epoch.Add(time.Second)},
		{name: "another platform gives another digest", bin: bin, p: arm64, creat: epoch},
		{name: "another binary gives another digest", bin: standIn(t, "binary two"), p: amd64, creat: epoch},
	}
	for _, o := range others {
		t.Run(o.name, func(t *testing.T) {
			img, err := NewImage(o.bin, o.p, o.creat)
			if err != nil {
				t.Fatal(err)
			}
			if digest(t, img) == digest(t, first) {
				t.Errorf("the digest did not change")
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.Created.Equal(o.creat) || cfg.Architecture != o.p.Architecture {
				t.Errorf("config says created %v for %s, want %v for %s", cfg.Created.Time, cfg.Architecture, o.creat, o.p.Architecture)
			}
		})
	}
}

func TestExtractManager(t *testing.T) {
	p := v1.Platform{OS: "linux", Architecture: "amd64"}
	tag, err := name.NewTag(testRef)
	if err != nil {
		t.Fatal(err)
	}
	good, err := NewImage(standIn(t, "the manager"), p, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := mutate.Config(good, v1.Config{Entrypoint: []string{"/bin/manager"}})
	if err != nil {
		t.Fatal(err)
	}
	noEntrypoint, err := mutate.Config(good, v1.Config{})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		img   v1.Image
		error string
	}{
		{name: "it copies the entrypoint out, executable", img: good},
		{name: "an entrypoint the layers do not hold is an error", img: elsewhere, error: "no file /bin/manager"},
		{name: "an image without an entrypoint is an error", img: noEntrypoint, error: "no entrypoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "image.tar")
			if err := writeTarball(file, tag, tt.img); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(t.TempDir(), "bin", "manager")
			err := ExtractManager(file, dest)
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("ExtractManager() error = %v, want one saying %q", err, tt.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(dest)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "the manager" || info.Mode().Perm() != 0o755 {
				t.Errorf("extracted %q with mode %v, want %q with mode 0755", got, info.Mode().Perm(), "the manager")
			}
		})
	}
}

func TestIndex(t *testing.T) {
	bin := standIn(t, "the manager")
	image := func(arch string) v1.Image {
		img, err := NewImage(bin, v1.Platform{OS: "linux", Architecture: arch}, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}

	t.Run("each image is listed under the platform of its config", func(t *testing.T) {
		idx, err := Index([]v1.Image{image("amd64"), image("arm64")})
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range m.Manifests {
			got = append(got, d.Platform.String())
		}
		if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, got); diff != "" {
			t.Errorf("index platforms (-want +got):\n%s", diff)
		}
	})

	t.Run("two images of one platform are refused", func(t *testing.T) {
		if _, err := Index([]v1.Image{image("amd64"), image("amd64")}); err == nil {
			t.Error("Index() accepted two linux/amd64 images")
		}
	})
}

func TestARebuiltHostTarballKeepsTheTagItReplaces(t *testing.T) {
	img, err := NewImage(standIn(t, "the manager"), HostPlatform(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tagged := filepath.Join(dir, "tagged.tar")
	tag, err := name.NewTag("registry.example/team/move-operator:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTarball(tagged, tag, img); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		path string
		want string
	}{
		{name: "the tag of make image IMG=... is kept", path: tagged, want: tag.String()},
		{name: "without a tarball it is the default", path: filepath.Join(dir, "absent.tar"), want: DefaultRef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := existingTag(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("existingTag() = %q, want %q", got, tt.want)
			}
		})
	}
}
