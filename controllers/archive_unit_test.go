package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backup"
)

// A restore's spec.namespaces must name what its backup was taken of; the
// objects the backup's graph reached elsewhere come with them, as in a move.
func TestARestoreNamesTheNamespacesItsBackupWasTakenOf(t *testing.T) {
	of := func(taken []string, objects ...string) *archive.Archive {
		a := &archive.Archive{}
		a.Index.Namespaces = taken
		for _, ns := range objects {
			a.Index.Objects = append(a.Index.Objects, archive.Entry{Namespace: ns})
		}
		return a
	}
	for _, c := range []struct {
		a     *archive.Archive
		named []string
		want  string
	}{
		{of([]string{"fleet"}, "fleet", "capl-system"), []string{"fleet"}, "[]"},
		{of([]string{"fleet"}, "fleet"), nil, "[]"},
		{of([]string{"a", "b"}, "a", "b"), []string{"a"}, "[b]"},
		{of(nil, "a", "", "b"), []string{"a"}, "[b]"},
	} {
		if got := fmt.Sprint(namespacesNotNamed(c.a, c.named)); got != c.want {
			t.Errorf("an archive of %v (objects in %v) restored with spec.namespaces %v: %s not named, want %s", c.a.Index.Namespaces, c.a.Index.Objects, c.named, got, c.want)
		}
	}
}

// A backup rolled back deletes the archive it stored and did not record,
// by its name, also after a restart (nothing of the run remembered); one
// the status records stays.
func TestARolledBackBackupDeletesTheArchiveItDidNotRecord(t *testing.T) {
	dir := t.TempDir()
	r := &MoveOperationReconciler{Archives: Archives{Directory: dir}}
	mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "nightly", UID: "0f9c2038-0bf0-459a-9971-180a8c22d22a"},
		Spec: movev1alpha1.MoveOperationSpec{Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, Unencrypted: true}}}}
	path := filepath.Join(dir, archiveName(mo))
	write := func() {
		if err := os.WriteFile(path, []byte("an archive"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write()
	if _, err := r.discardArchive(context.Background(), newScope(mo)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the unrecorded archive is still there: %v", err)
	}
	write()
	mo.Status.Archive = &movev1alpha1.ArchiveStatus{Location: path, Digest: "sha256:x"}
	if _, err := r.discardArchive(context.Background(), newScope(mo)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the recorded archive was deleted: %v", err)
	}
}

// Once a restore has validated, resuming what its archive paused needs
// neither the archive nor its store: a restarted operator whose store is
// away must not keep the new cluster's providers stopped.
func TestARestoreResumesThePausesItRecordedWithoutItsStore(t *testing.T) {
	r := &MoveOperationReconciler{} // no archive directory: the store cannot be opened
	mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "restore", UID: "restore-uid"},
		Spec: movev1alpha1.MoveOperationSpec{Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{Directory: &movev1alpha1.DirectoryStore{}, Location: "a"}}}}
	if _, err := r.pausedByOf(context.Background(), newScope(mo)); err == nil {
		t.Fatal("without a record nor a store, the pauses to resume were found somewhere")
	}
	mo.Status.RestoredPausesOf = "backup-uid"
	by, err := r.pausedByOf(context.Background(), newScope(mo))
	if err != nil || by != "backup-uid" {
		t.Errorf("pausedByOf = %q, %v; want the recorded backup-uid", by, err)
	}
}

// A restore that ends before Copying (refused in Validating, or deleted)
// lets go of its archive when its memo is forgotten: nothing else would
// close the file, and a registry's archive spooled to disk would hold its
// space until the operator restarted.
func TestAForgottenRestoreClosesItsArchive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewWriter(f, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(archive.Index{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	a, err := archive.OpenFile(f)
	if err != nil {
		t.Fatal(err)
	}
	r := &MoveOperationReconciler{}
	r.memoOf("restore-uid").restoring = &backup.Restore{Archive: a}
	r.forgetMemo("restore-uid")
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the archive's file is still open after its restore was forgotten: %v", err)
	}
	if _, ok := r.memos.Load(types.UID("restore-uid")); ok {
		t.Error("the memo is still kept")
	}
}
