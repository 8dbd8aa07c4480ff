package command

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/move-operator/move-operator/internal/archive"
)

// writeArchive writes an encrypted archive of a Cluster and its Secret to
// a file, and the key that reads it to another.
func writeArchive(t *testing.T) (path, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	key, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, "key.txt")
	if err := os.WriteFile(keyFile, []byte(key.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Recipients: []age.Recipient{key.Recipient()}}, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range []struct{ apiVersion, kind, name string }{
		{"cluster.x-k8s.io/v1beta2", "Cluster", "one"}, {"v1", "Secret", "one-kubeconfig"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.apiVersion)
		u.SetKind(o.kind)
		u.SetNamespace("fleet")
		u.SetName(o.name)
		u.SetUID(types.UID("uid-" + o.name))
		if o.kind == "Secret" {
			_ = unstructured.SetNestedField(u.Object, "c2VjcmV0LWRhdGE=", "data", "value")
		}
		if err := w.Add(i, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(archive.Index{Source: "source-uid", Namespaces: []string{"fleet"}, PausedBy: "backup-uid"}); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "backup.tar.age")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, keyFile
}

func run(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestArchiveListsInspectsAndDecryptsOffline(t *testing.T) {
	path, keyFile := writeArchive(t)
	out, _, err := run("list", "--identity", keyFile, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Cluster.cluster.x-k8s.io", "fleet", "one-kubeconfig", "uid-one"} {
		if !strings.Contains(out, want) {
			t.Errorf("list does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "c2VjcmV0") {
		t.Error("list prints a Secret's data")
	}
	out, _, err = run("inspect", "--identity", keyFile, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Encrypted:", "true", "source-uid", "2 in 2 creation groups", "Secret", "SHA-256:", "sha256:", "Paused by:", "backup-uid"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "c2VjcmV0") {
		t.Error("inspect prints a Secret's data")
	}
	dir := filepath.Join(t.TempDir(), "unpacked")
	if _, _, err := run("decrypt", "--identity", keyFile, "--to-directory", dir, path); err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(filepath.Join(dir, "objects", "Secret_fleet_one-kubeconfig.yaml"))
	if err != nil || !bytes.Contains(secret, []byte("c2VjcmV0LWRhdGE=")) {
		t.Errorf("decrypt wrote the Secret as %s (%v)", secret, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "objects", "Secret_fleet_one-kubeconfig.yaml")); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("decrypt wrote the Secret's file with mode %v, want 0600: it holds the Secret's data in the clear", fi.Mode().Perm())
	}
	if out, _, err := run("list", dir); err != nil || !strings.Contains(out, "one-kubeconfig") {
		t.Errorf("list of the decrypted directory: %v\n%s", err, out)
	}
}

func TestArchiveSaysWhatIsWrong(t *testing.T) {
	path, _ := writeArchive(t)
	_, _, err := run("list", path)
	if !errors.Is(err, archive.ErrKeyRequired) || !strings.Contains(err.Error(), "private key") {
		t.Errorf("list without a key: %v", err)
	}
	other, _ := writeArchive(t)
	_, otherKey := writeArchive(t)
	if _, _, err := run("list", "--identity", otherKey, other); !errors.Is(err, archive.ErrWrongKey) {
		t.Errorf("list with another key: %v", err)
	}
	if _, stderr, err := run("decrypt", path); !errors.Is(err, ErrUsage) || !strings.Contains(stderr, "--to-directory") {
		t.Errorf("decrypt without a directory: %v, %s", err, stderr)
	}
	if _, _, err := run("frobnicate", path); !errors.Is(err, ErrUsage) {
		t.Errorf("an unknown verb: %v", err)
	}
}

func TestARegistryReferenceNamesItsRepository(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.example.com:5000/backups/mgmt@sha256:0123abcd": "registry.example.com:5000/backups/mgmt",
		"registry.example.com:5000/backups/mgmt:nightly":         "registry.example.com:5000/backups/mgmt",
		"registry.example.com:5000/backups/mgmt":                 "registry.example.com:5000/backups/mgmt",
		"127.0.0.1:5000/fleet@sha256:0123abcd":                   "127.0.0.1:5000/fleet",
	} {
		if got := repositoryOf(ref); got != want {
			t.Errorf("repositoryOf(%q) = %q, want %q", ref, got, want)
		}
	}
}
