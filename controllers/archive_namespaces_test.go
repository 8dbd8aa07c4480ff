package controllers

import (
	"fmt"
	"testing"

	"github.com/move-operator/move-operator/internal/archive"
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
