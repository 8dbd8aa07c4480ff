package archive

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

var taken = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// fleet returns a Cluster, its Secret (with data) and a Machine it owns,
// with a status: what an archive must carry whole.
func fleet() []*unstructured.Unstructured {
	cluster := object("cluster.x-k8s.io/v1beta2", "Cluster", "ns-a", "one", "uid-cluster")
	_ = unstructured.SetNestedField(cluster.Object, true, "status", "initialization", "infrastructureProvisioned")
	secret := object("v1", "Secret", "ns-a", "one-kubeconfig", "uid-secret")
	_ = unstructured.SetNestedField(secret.Object, "c2VjcmV0", "data", "value")
	machine := object("cluster.x-k8s.io/v1beta2", "Machine", "ns-a", "one-m", "uid-machine")
	machine.SetOwnerReferences(ownerRef(cluster))
	_ = unstructured.SetNestedField(machine.Object, "Running", "status", "phase")
	return []*unstructured.Unstructured{cluster, secret, machine}
}

func object(apiVersion, kind, ns, name, uid string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	return u
}

func ownerRef(owner *unstructured.Unstructured) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}}
}

func write(t *testing.T, enc Encryption, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, enc, taken)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		if err := w.Add(min(i, 1), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(Index{Source: "source-uid", Namespaces: []string{"ns-a"}}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newKey(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func sameObjects(t *testing.T, got, want []*unstructured.Unstructured) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d objects, wrote %d", len(got), len(want))
	}
	for i := range want {
		if !equality.Semantic.DeepEqual(got[i].Object, want[i].Object) {
			t.Errorf("object %d read back as %v, written as %v", i, got[i].Object, want[i].Object)
		}
	}
}

func TestAnEncryptedArchiveReadsBackWholeWithTheKey(t *testing.T) {
	key := newKey(t)
	data := write(t, Encryption{Recipients: []age.Recipient{key.Recipient()}}, fleet())
	if bytes.Contains(data, []byte("c2VjcmV0")) || bytes.Contains(data, []byte("one-kubeconfig")) {
		t.Fatal("an encrypted archive shows a Secret's data or an object's name in the clear")
	}
	a, err := Read(bytes.NewReader(data), key)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Encrypted || a.Index.Source != "source-uid" || a.Index.Groups != 2 || !a.Index.Taken.Equal(taken) {
		t.Errorf("index read back as %+v, encrypted %v", a.Index, a.Encrypted)
	}
	sameObjects(t, a.Objects(), fleet())
	if g := a.Index.Objects[2].Group; g != 1 {
		t.Errorf("the Machine is of group %d, written in group 1", g)
	}
}

func TestAnArchiveIsEncryptedUnlessAskedByName(t *testing.T) {
	if _, err := NewWriter(&bytes.Buffer{}, Encryption{}, taken); !errors.Is(err, ErrNoRecipients) {
		t.Fatalf("a writer with no recipients and no Unencrypted: %v, want ErrNoRecipients", err)
	}
	data := write(t, Encryption{Unencrypted: true}, fleet())
	a, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if a.Encrypted {
		t.Error("an unencrypted archive reads as encrypted")
	}
	sameObjects(t, a.Objects(), fleet())
}

func TestAnArchiveIsRefusedWithoutItsKey(t *testing.T) {
	data := write(t, Encryption{Recipients: []age.Recipient{newKey(t).Recipient()}}, fleet())
	if _, err := Read(bytes.NewReader(data)); !errors.Is(err, ErrKeyRequired) {
		t.Errorf("read with no key: %v, want ErrKeyRequired", err)
	}
	if _, err := Read(bytes.NewReader(data), newKey(t)); !errors.Is(err, ErrWrongKey) {
		t.Errorf("read with another key: %v, want ErrWrongKey", err)
	}
}

// Every byte of an encrypted archive is checked: changed anywhere, or cut
// anywhere, it is refused, never read in part. Every byte of the header
// (its first 256), then one in 7 (a decryption each: the whole would take
// seconds).
func TestAChangedOrCutEncryptedArchiveIsRefused(t *testing.T) {
	key := newKey(t)
	data := write(t, Encryption{Recipients: []age.Recipient{key.Recipient()}}, fleet())
	var at []int
	for i := 0; i < len(data); i += map[bool]int{true: 1, false: 7}[i < 256] {
		at = append(at, i)
	}
	for _, i := range append(at, len(data)-1) {
		changed := bytes.Clone(data)
		changed[i] ^= 0x01
		if a, err := Read(bytes.NewReader(changed), key); err == nil {
			t.Fatalf("byte %d of %d changed: read %d objects", i, len(data), len(a.Objects()))
		}
		if a, err := Read(bytes.NewReader(data[:i]), key); err == nil {
			t.Fatalf("cut after %d of %d bytes: read %d objects", i, len(data), len(a.Objects()))
		}
	}
	_, err := Read(bytes.NewReader(data[:len(data)/2]), key)
	if !errors.Is(err, ErrDamaged) {
		t.Errorf("an archive cut in half: %v, want ErrDamaged", err)
	}
}

// An unencrypted archive has no authentication, but every object's file
// is held against the SHA-256 its index records, and an archive cut before
// its index is refused.
func TestAChangedOrCutUnencryptedArchiveIsRefused(t *testing.T) {
	data := write(t, Encryption{Unencrypted: true}, fleet())
	at := bytes.Index(data, []byte("c2VjcmV0"))
	changed := bytes.Clone(data)
	changed[at] = 'd'
	if _, err := Read(bytes.NewReader(changed)); !errors.Is(err, ErrDamaged) {
		t.Errorf("a Secret's data changed: %v, want ErrDamaged", err)
	}
	indexAt := bytes.Index(data, []byte(`"format"`))
	for _, cut := range []int{indexAt - 600, indexAt - 1, indexAt + 10, indexAt + 100} {
		if _, err := Read(bytes.NewReader(data[:cut])); err == nil {
			t.Errorf("cut after %d of %d bytes: read", cut, len(data))
		}
	}
}

func TestWhatIsNotAnArchiveIsNamedSo(t *testing.T) {
	_, err := Read(bytes.NewReader([]byte("apiVersion: v1\nkind: ConfigMap\n")))
	if !errors.Is(err, ErrNotArchive) {
		t.Errorf("a YAML file read as an archive: %v, want ErrNotArchive", err)
	}
}

func TestAnUnpackedArchiveReadsBackWhole(t *testing.T) {
	a, err := Read(bytes.NewReader(write(t, Encryption{Unencrypted: true}, fleet())))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	if err := Unpack(a, dir); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(a, dir); err == nil {
		t.Error("unpacked over an existing directory")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "*"))
	want := []string{"Cluster_ns-a_one.yaml", "Machine_ns-a_one-m.yaml", "Secret_ns-a_one-kubeconfig.yaml"}
	if len(files) != len(want) {
		t.Fatalf("unpacked %v, want clusterctl's file names %v", files, want)
	}
	for i := range want {
		if filepath.Base(files[i]) != want[i] {
			t.Errorf("unpacked %s, want %s", filepath.Base(files[i]), want[i])
		}
	}
	back, err := ReadDirectory(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, back.Objects(), fleet())
	if back.Index.Groups != 2 {
		t.Errorf("the unpacked archive's index has %d groups, want 2", back.Index.Groups)
	}
	if err := os.WriteFile(filepath.Join(dir, "objects", want[2]), []byte(`{"apiVersion":"v1","kind":"Secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDirectory(dir); !errors.Is(err, ErrDamaged) {
		t.Errorf("an unpacked Secret changed: %v, want ErrDamaged", err)
	}
}

// A directory clusterctl move --to-directory wrote: one JSON object per
// file, named Kind_namespace_name.yaml, nothing else.
func TestADirectoryClusterctlWroteReads(t *testing.T) {
	dir := t.TempDir()
	for _, o := range fleet() {
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName(o.GetKind(), o.GetNamespace(), o.GetName())), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := ReadDirectory(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Objects()) != 3 || a.Index.Format != "" || fmt.Sprint(a.Index.Namespaces) != "[ns-a]" {
		t.Errorf("read %d objects, index %+v", len(a.Objects()), a.Index)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDirectory(dir); !errors.Is(err, ErrNotArchive) {
		t.Errorf("a directory with a file that is no object: %v, want ErrNotArchive", err)
	}
}

func TestKeysAreReadFromSecretsWithoutShowingThem(t *testing.T) {
	key := newKey(t)
	rs, err := ParseRecipients([]byte("# ops team\n"+key.Recipient().String()+"\n"), "Secret backup-keys, key recipients")
	if err != nil || len(rs) != 1 {
		t.Fatalf("recipients: %v, %v", rs, err)
	}
	if _, err := ParseRecipients([]byte("# nothing\n"), "Secret backup-keys, key recipients"); err == nil {
		t.Error("a Secret with no recipient was taken")
	}
	secret := key.String()
	_, err = ParseIdentities([]byte(secret[:len(secret)-3]+"xyz\n"), "Secret restore-key, key identity")
	if err == nil {
		t.Fatal("a damaged private key was taken")
	}
	if bytes.Contains([]byte(err.Error()), []byte(secret[15:30])) {
		t.Errorf("the error about a private key shows it: %v", err)
	}
	ids, err := ParseIdentities([]byte(secret), "Secret restore-key, key identity")
	if err != nil || len(ids) != 1 {
		t.Fatalf("identities: %v, %v", ids, err)
	}
}
