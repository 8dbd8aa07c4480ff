package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// many returns n Machines of one namespace, each with a status.
func many(n int) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := range n {
		m := object("cluster.x-k8s.io/v1beta2", "Machine", "ns-a", fmt.Sprintf("m-%03d", i), fmt.Sprintf("uid-m-%03d", i))
		_ = unstructured.SetNestedField(m.Object, "Running", "status", "phase")
		out = append(out, m)
	}
	return out
}

// The writer keeps its index in a spool file, never in memory, and
// leaves nothing in the spool directory: the index it writes is the one an
// index marshalled whole would be, entry for entry.
func TestTheStreamedIndexIsTheWholeIndex(t *testing.T) {
	spool := t.TempDir()
	objs := append(fleet(), many(50)...)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Encryption{Unencrypted: true}, taken, SpoolIn(spool))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		if err := w.Add(min(i, 1), o); err != nil {
			t.Fatal(err)
		}
	}
	if w.Len() != len(objs) {
		t.Errorf("the writer counts %d objects, want %d", w.Len(), len(objs))
	}
	if err := w.Close(Index{Source: "source-uid", Namespaces: []string{"ns-a"}, PausedBy: "backup-op"}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("the writer left %d files in its spool directory", len(left))
	}
	a, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, a.Objects(), objs)
	want := Index{Format: Format, Taken: taken, Source: "source-uid", Namespaces: []string{"ns-a"}, PausedBy: "backup-op", Groups: 2}
	for i, o := range objs {
		data, _ := o.MarshalJSON()
		want.Objects = append(want.Objects, Entry{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
			UID: o.GetUID(), Group: min(i, 1), File: objectsDir + FileName(o.GetKind(), o.GetNamespace(), o.GetName()), SHA256: sha(data)})
	}
	gotJSON, _ := json.Marshal(a.Index)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("index read back:\n%s\nwant:\n%s", gotJSON, wantJSON)
	}
}

// An archive of no object has an index of no object.
func TestAnEmptyArchiveReadsBack(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Encryption{Unencrypted: true}, taken)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(Index{PausedBy: "backup-op"}); err != nil {
		t.Fatal(err)
	}
	a, err := Read(&buf)
	if err != nil || len(a.Index.Objects) != 0 || a.Index.PausedBy != "backup-op" {
		t.Fatalf("an empty archive read back as %+v, %v", a, err)
	}
}

// Archives written before the index was streamed (the index marshalled
// whole, indented) are read as before.
func TestAnArchiveWithTheIndexMarshalledWholeReads(t *testing.T) {
	objs := fleet()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	ix := Index{Format: Format, Taken: taken, Source: "source-uid", Namespaces: []string{"ns-a"}, Groups: 1}
	put := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: taken, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		data, _ := o.MarshalJSON()
		file := objectsDir + FileName(o.GetKind(), o.GetNamespace(), o.GetName())
		put(file, data)
		ix.Objects = append(ix.Objects, Entry{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), File: file, SHA256: sha(data)})
	}
	data, _ := json.MarshalIndent(ix, "", "  ")
	put(indexFile, data)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, a.Objects(), objs)
	if a.Index.Source != "source-uid" || len(a.Index.Objects) != 3 {
		t.Errorf("index read back as %+v", a.Index)
	}
}

// Two objects of one file name would overwrite each other when unpacked:
// the second is refused.
func TestTwoObjectsOfOneFileNameAreRefused(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, Encryption{Unencrypted: true}, taken)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abandon()
	if err := w.Add(0, object("cluster.x-k8s.io/v1beta2", "Machine", "ns-a", "m", "uid-1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(0, object("infrastructure.example.com/v1", "Machine", "ns-a", "m", "uid-2")); err == nil {
		t.Error("a second Machine ns-a/m of another API group was written")
	}
	if err := w.Add(0, object("infrastructure.example.com/v1", "Machine", "ns-b", "m", "uid-3")); err != nil {
		t.Errorf("a Machine of another namespace was refused: %v", err)
	}
}

// An archive opened from a file is read an object at a time: each object
// is read again from the file, and a file changed since it was opened is
// refused, not served.
func TestAnOpenedArchiveReadsEachObjectFromItsFile(t *testing.T) {
	key := newKey(t)
	for _, enc := range []Encryption{{Unencrypted: true}, {Recipients: []age.Recipient{key.Recipient()}}} {
		t.Run(fmt.Sprintf("encrypted %v", !enc.Unencrypted), func(t *testing.T) {
			// More than one of age's 64 KiB chunks: the one read last
			// is kept decrypted, the others are decrypted again.
			objs := fleet()
			for _, m := range many(100) {
				m.SetAnnotations(map[string]string{"padding": strings.Repeat("x", 1000)})
				objs = append(objs, m)
			}
			data := write(t, enc, objs)
			path := filepath.Join(t.TempDir(), "archive")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			a, err := Open(f, int64(len(data)), key)
			if err != nil {
				t.Fatal(err)
			}
			sameObjects(t, a.Objects(), objs)

			at := bytes.Index(data, []byte("c2VjcmV0"))
			if at < 0 {
				at = 1000 // encrypted: in the first chunk
			}
			changed := bytes.Clone(data)
			changed[at] ^= 0x01
			if err := os.WriteFile(path, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			var failed error
			for _, err := range a.All() {
				failed = errors.Join(failed, err)
			}
			if !errors.Is(failed, ErrDamaged) {
				t.Errorf("reading an archive changed since it was opened: %v, want ErrDamaged", failed)
			}
		})
	}
}

// A list asked for in pages comes in pages, every object once.
func TestAListComesInThePagesAskedFor(t *testing.T) {
	objs := many(25)
	objs = append(objs, object("cluster.x-k8s.io/v1beta2", "Machine", "ns-b", "other", "uid-other"))
	a, err := Read(bytes.NewReader(write(t, Encryption{Unencrypted: true}, objs)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	pages := 0
	for token := ""; ; {
		pages++
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineList"})
		if err := a.Reader().List(context.Background(), list, client.InNamespace("ns-a"), client.Limit(10), client.Continue(token)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 10 {
			t.Fatalf("a page of %d objects, limit 10", len(list.Items))
		}
		for _, item := range list.Items {
			if seen[item.GetName()] || item.GetNamespace() != "ns-a" {
				t.Errorf("listed %s/%s again, or of another namespace", item.GetNamespace(), item.GetName())
			}
			seen[item.GetName()] = true
		}
		if token = list.GetContinue(); token == "" {
			break
		}
	}
	if len(seen) != 25 || pages != 3 {
		t.Errorf("listed %d Machines of ns-a in %d pages, want 25 in 3", len(seen), pages)
	}
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// An archive opened from a file it owns lets go of the file when closed:
// a restore that finished keeps no file open, nor a copy of a registry's
// archive on disk.
func TestAnArchiveClosesTheFileItOwns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive")
	if err := os.WriteFile(path, write(t, Encryption{Unencrypted: true}, fleet()), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Object(0); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the archive's file after Close: %v, want it closed", err)
	}
	if _, err := a.Object(0); err == nil {
		t.Error("a closed archive read an object")
	}
	if len(a.Index.Objects) != 3 || a.Close() != nil {
		t.Errorf("a closed archive's index: %d entries; closing it again must do nothing", len(a.Index.Objects))
	}
}
