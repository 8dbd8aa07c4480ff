//go:build cluster

package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backup"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planner"
	"github.com/move-operator/move-operator/test/fleet"
	clusterctltest "github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/registry"
	"github.com/move-operator/move-operator/test/snapshot"
)

// backUp pauses the fleet as a backup does, writes the plan read after the
// pause to an archive in store (encrypted to recipient, unencrypted when
// nil), resumes the source, and returns what was stored.
func backUp(t *testing.T, ctx context.Context, m *mover, store backupstore.Store, recipient age.Recipient) backupstore.Stored {
	t.Helper()
	p := m.prepare(ctx)
	enc := archive.Encryption{Unencrypted: recipient == nil}
	if recipient != nil {
		enc.Recipients = []age.Recipient{recipient}
	}
	about := backup.About{Selection: planner.Selection{Namespaces: m.namespaces}, PausedBy: m.op}
	stored, err := store.Put(ctx, "backup-"+m.op, func(w io.Writer) error {
		aw, err := archive.NewWriter(w, enc, time.Now())
		if err != nil {
			return err
		}
		return backup.Write(ctx, m.source, p, aw, about)
	})
	if err != nil {
		t.Fatalf("backing up: %v", err)
	}
	if _, err := move.Unpause(ctx, m.source, p.Types(), m.op, move.Options{}); err != nil {
		t.Fatalf("resuming the source after the backup: %v", err)
	}
	return stored
}

// startRegistry starts a registry with credentials; its first start on a
// machine builds it, which takes minutes of its own, outside the test's
// time bound.
func startRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	reg, err := registry.Start(ctx, t.TempDir(), registry.Options{User: "backup", Password: "s3cret"})
	if err != nil {
		t.Fatalf("starting a registry: %v", err)
	}
	t.Cleanup(reg.Stop)
	return reg
}

// backedUpFleet creates a fleet of n workload clusters in the source, backs
// it up unencrypted to a directory and reads the archive back.
func backedUpFleet(t *testing.T, ctx context.Context, n int) (*testFleet, *mover, *archive.Archive) {
	t.Helper()
	f := createFleet(t, ctx, n)
	m := newMover(t, f.Namespaces, nil)
	store := backupstore.Directory{Path: t.TempDir()}
	a := openArchive(t, ctx, store, backUp(t, ctx, m, store, nil).Location)
	if a.Encrypted {
		t.Fatalf("an archive asked for unencrypted was encrypted")
	}
	return f, m, a
}

// openArchive reads a stored archive back, as a restore does.
func openArchive(t *testing.T, ctx context.Context, store backupstore.Store, ref string, ids ...age.Identity) *archive.Archive {
	t.Helper()
	rc, err := store.Open(ctx, ref)
	if err != nil {
		t.Fatalf("opening the archive: %v", err)
	}
	defer rc.Close()
	a, err := archive.Read(rc, ids...)
	if err != nil {
		t.Fatalf("reading the archive: %v", err)
	}
	return a
}

func readAll(t *testing.T, ctx context.Context, store backupstore.Store, ref string) []byte {
	t.Helper()
	rc, err := store.Open(ctx, ref)
	if err != nil {
		t.Fatalf("opening the archive: %v", err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading the archive: %v", err)
	}
	return raw
}

// newRestore returns a restore of a into the target that records its
// copies as the operator records a move's, so that a run after a crash
// knows them.
func newRestore(a *archive.Archive, target client.Client, op string) *backup.Restore {
	return &backup.Restore{
		Archive: a, Target: target, Operation: op, Copies: copiesOf(op),
		OnCopied: func(_ context.Context, _ int, uids []types.UID) error {
			v, _ := copyRecords.LoadOrStore(op, &sync.Map{})
			for _, u := range uids {
				v.(*sync.Map).Store(u, true)
			}
			return nil
		},
	}
}

func targetKinds(t *testing.T, ctx context.Context, target client.Client) *graph.Types {
	t.Helper()
	kinds, err := graph.DiscoverTypes(ctx, target)
	if err != nil {
		t.Fatalf("discovering the target's kinds: %v", err)
	}
	return kinds
}

// withStatus captures objects, statuses and every manager's fields.
var withStatus = snapshot.Options{Status: true, UpdateManagers: true}

func TestABackupInARegistryRestoresIntoAnotherClusterAsTheSourceWasAfterCrashes(t *testing.T) {
	reg := startRegistry(t)
	ctx := testContext(t)
	f := createFleet(t, ctx, 3)
	m := newMover(t, f.Namespaces, nil)
	before := f.take(t, ctx, m.source, withStatus)

	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	// A real registry (CNCF Distribution) with credentials; the restore
	// reads the archive by the location the push returned, pinned by
	// digest.
	store := backupstore.OCI{Repository: reg.Host + "/fleet/backups", Auth: &authn.Basic{Username: "backup", Password: "s3cret"}}
	stored := backUp(t, ctx, m, store, id.Recipient())
	if !strings.HasSuffix(stored.Location, "@"+stored.Digest) {
		t.Errorf("the backup is at %s, not pinned by its digest %s", stored.Location, stored.Digest)
	}

	t.Run("the backup leaves the source as it was", func(t *testing.T) {
		if d := snapshot.Diff(before, f.take(t, ctx, m.source, withStatus)); d != "" {
			t.Errorf("the source changed (-before +after):\n%s", d)
		}
	})
	a := openArchive(t, ctx, store, stored.Location, id)
	if !a.Encrypted {
		t.Errorf("the archive was written in the clear; a backup is encrypted to the recipients it is given")
	}
	if raw := readAll(t, ctx, store, stored.Location); bytes.Contains(raw, []byte(f.Namespaces[0])) {
		t.Errorf("the stored archive names the fleet's namespace %s in the clear", f.Namespaces[0])
	}

	kinds := targetKinds(t, ctx, m.target)
	op := operation()
	// Crashes in the first group, in the middle, and just before the end:
	// each run after one is a new Restore that knows only the copies
	// recorded, as a restarted operator does.
	total := int32(len(a.Index.Objects))
	for _, k := range []int32{2, total / 2, total - 3} {
		_, err := newRestore(a, failAfter(watchable(t, env.Target.Config), k, "create"), op).Run(ctx, kinds)
		if !errorContains(err, "injected crash") {
			t.Fatalf("the restore interrupted after %d creates returned %v", k, err)
		}
	}
	p, err := newRestore(a, m.target, op).Run(ctx, kinds)
	if err != nil {
		t.Fatalf("resuming the restore: %v", err)
	}
	if p.Len() != len(a.Index.Objects) {
		t.Errorf("the restore planned %d objects, the archive holds %d", p.Len(), len(a.Index.Objects))
	}

	t.Run("the target holds what the source held, statuses and managers included", func(t *testing.T) {
		if d := snapshot.Diff(snapshot.PausedOnce(before), snapshot.PausedOnce(f.take(t, ctx, m.target, withStatus))); d != "" {
			t.Errorf("the target differs from the source (-source +target):\n%s", d)
		}
	})
	t.Run("every ownerReference in the target points at an object of the target", func(t *testing.T) {
		checkOwnerReferences(t, ctx, m.target, f, kinds)
	})
	t.Run("nothing the backup paused is left paused", func(t *testing.T) {
		for name, c := range map[string]client.Client{"source": m.source, "target": m.target} {
			if n, err := move.Unpause(ctx, c, kinds, m.op, move.Options{}); err != nil || n > 0 {
				t.Errorf("%d objects still paused by the backup in the %s (%v)", n, name, err)
			}
		}
	})
	t.Run("the restore refuses a second time into the same cluster, naming what is in its way", func(t *testing.T) {
		_, err := newRestore(a, m.target, operation()).Run(ctx, kinds)
		if !errors.Is(err, backup.ErrInTheWay) || !errorContains(err, "Cluster.cluster.x-k8s.io "+f.Namespaces[0]+"/") {
			t.Errorf("a restore over the restored fleet returned %v, want %v naming a Cluster", err, backup.ErrInTheWay)
		}
	})
}

func TestARestoreOfKindsTheClusterDoesNotServeWritesNothing(t *testing.T) {
	ctx := testContext(t)
	ns := "restore-" + operation()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cm := configMap(ns, "kept")
	cm.SetUID("uid-cm")
	old := &unstructured.Unstructured{}
	old.SetAPIVersion("cluster.x-k8s.io/v1alpha1") // served by no Cluster API today
	old.SetKind("Cluster")
	old.SetNamespace(ns)
	old.SetName("old")
	old.SetUID("uid-old")
	gone := &unstructured.Unstructured{}
	gone.SetAPIVersion("infrastructure.example.com/v1")
	gone.SetKind("GoneMachine")
	gone.SetNamespace(ns)
	gone.SetName("gone")
	gone.SetUID("uid-gone")
	for _, o := range []*unstructured.Unstructured{cm, old, gone} {
		if err := w.Add(0, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(archive.Index{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	a, err := archive.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	_, target := clients(t)
	_, err = newRestore(a, target, operation()).Run(ctx, targetKinds(t, ctx, target))
	if !errors.Is(err, backup.ErrNotServed) || !errorContains(err, "Cluster.cluster.x-k8s.io v1alpha1 (1)") || !errorContains(err, "GoneMachine.infrastructure.example.com v1 (1)") || !errorContains(err, "clusterctl init") {
		t.Errorf("restoring kinds the cluster does not serve returned %v; want %v naming each kind and version, and what to do", err, backup.ErrNotServed)
	}
	if err := target.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused restore left namespace %s in the cluster (%v), want nothing written", ns, err)
	}
}

func TestARestoreRefusesObjectsInItsWayBeforeItWritesAnything(t *testing.T) {
	ctx := testContext(t)
	f, m, a := backedUpFleet(t, ctx, 1)
	// One of the fleet's Secrets is in the target already, made by
	// someone else.
	var taken *archive.Entry
	for _, e := range a.Index.Objects {
		if e.Kind == "Secret" && e.Namespace == f.Namespaces[0] {
			taken = &e
			break
		}
	}
	if taken == nil {
		t.Fatalf("the archive holds no Secret of %s", f.Namespaces[0])
	}
	create(t, ctx, m.target, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: taken.Namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: taken.Namespace, Name: taken.Name}, StringData: map[string]string{"someone": "else"}})
	targetBefore := f.take(t, ctx, m.target, withStatus)

	_, err := newRestore(a, m.target, operation()).Run(ctx, targetKinds(t, ctx, m.target))
	if !errors.Is(err, backup.ErrInTheWay) || !errorContains(err, "Secret "+taken.Namespace+"/"+taken.Name) {
		t.Errorf("restoring over a Secret of the same name returned %v, want %v naming it", err, backup.ErrInTheWay)
	}
	if d := snapshot.Diff(targetBefore, f.take(t, ctx, m.target, withStatus)); d != "" {
		t.Errorf("the refused restore wrote into the cluster (-before +after):\n%s", d)
	}
}

func TestARestoreThatFailedHalfwayIsUndoneToWhatTheClusterHeld(t *testing.T) {
	ctx := testContext(t)
	f, m, a := backedUpFleet(t, ctx, 2)
	kinds := targetKinds(t, ctx, m.target)
	// The target held one of the fleet's namespaces already, with
	// something of its own in it.
	theirs := configMap(f.Namespaces[1], "theirs")
	create(t, ctx, m.target, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespaces[1]}}, theirs)

	op := operation()
	_, err := newRestore(a, failAfter(watchable(t, env.Target.Config), int32(len(a.Index.Objects)/2), "create"), op).Run(ctx, kinds)
	if !errorContains(err, "injected crash") {
		t.Fatalf("the restore interrupted halfway returned %v", err)
	}
	r := newRestore(a, m.target, op)
	p, err := r.Plan(ctx, kinds)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.Undo(ctx, p)
	if err != nil || n == 0 {
		t.Fatalf("Undo: %d deleted, %v; want what the restore created", n, err)
	}
	left := f.take(t, ctx, m.target, snapshot.Options{})
	for _, o := range left.Objects {
		if o.Namespace == "" || o.Namespace == fleet.ProviderNamespace {
			continue // global objects: in the target before the restore
		}
		if o.Namespace != theirs.GetNamespace() || o.Name != theirs.GetName() {
			t.Errorf("%s is left in the target after the restore was undone", o.Key())
		}
	}
	if _, err := get(ctx, m.target, configMapGVK, theirs.GetNamespace(), theirs.GetName()); err != nil {
		t.Errorf("the undo took what the cluster held before the restore: %v", err)
	}
	for _, ns := range f.Namespaces {
		got, err := get(ctx, m.target, namespaceGVK, "", ns)
		switch {
		case ns == theirs.GetNamespace() && (err != nil || got.GetDeletionTimestamp() != nil):
			t.Errorf("namespace %s, which the cluster held before the restore, is deleted (%v)", ns, err)
		case ns != theirs.GetNamespace() && err == nil && got.GetDeletionTimestamp() == nil:
			t.Errorf("namespace %s, which the restore created, survived its undo", ns)
		}
	}
}

// TestClusterctlAndTheOperatorReadEachOthersDirectories shows both ways
// with clusterctl's own library: a directory clusterctl move
// --to-directory wrote is restored by the operator, and an archive the
// operator wrote, unpacked, is restored by clusterctl move
// --from-directory; each gives the source's fleet in the target.
func TestClusterctlAndTheOperatorReadEachOthersDirectories(t *testing.T) {
	ctx := testContext(t)
	cc, err := clusterctltest.NewClusterctlClient(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// clusterctl's restore drops every status, and its writes are its own
	// field manager's: compare what both keep. It resumes the Clusters it
	// restores by their spec.paused, leaving the annotation that names the
	// backup's pause, which nothing reads on a Cluster that is not paused.
	objectsOnly := snapshot.Options{IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation}}

	t.Run("the operator restores what clusterctl wrote", func(t *testing.T) {
		f := createFleet(t, ctx, 2)
		m := newMover(t, f.Namespaces, nil)
		dir := filepath.Join(t.TempDir(), "clusterctl")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, ns := range f.Namespaces {
			err := cc.Move(ctx, clusterctl.MoveOptions{
				FromKubeconfig: clusterctl.Kubeconfig{Path: env.Source.KubeconfigPath, Context: env.Source.Name},
				Namespace:      ns, ToDirectory: dir,
			})
			if err != nil {
				t.Fatalf("clusterctl move --to-directory --namespace %s: %v", ns, err)
			}
		}
		a, err := archive.ReadDirectory(dir)
		if err != nil {
			t.Fatalf("reading clusterctl's directory: %v", err)
		}
		kinds := targetKinds(t, ctx, m.target)
		if _, err := newRestore(a, m.target, operation()).Run(ctx, kinds); err != nil {
			t.Fatalf("restoring clusterctl's directory: %v", err)
		}
		// clusterctl wrote every status; the operator restores them.
		if d := snapshot.Diff(f.take(t, ctx, m.source, snapshot.Options{Status: true}), f.take(t, ctx, m.target, snapshot.Options{Status: true})); d != "" {
			t.Errorf("the target differs from the source (-source +target):\n%s", d)
		}
		checkOwnerReferences(t, ctx, m.target, f, kinds)
		assertNothingPaused(t, ctx, m.target, f)
	})

	t.Run("clusterctl restores what the operator wrote", func(t *testing.T) {
		// One workload cluster, of the classic shape: clusterctl restores a
		// ClusterClass without its status, and the Cluster webhook then
		// waits, for every Cluster of that class, for a controller to
		// reconcile the class again. None runs here, so under load the
		// outcome was the webhook's (its lookups timed out in CI), not
		// the archive's.
		f, m, a := backedUpFleet(t, ctx, 1)
		dir := filepath.Join(t.TempDir(), "unpacked")
		if err := archive.Unpack(a, dir); err != nil {
			t.Fatalf("unpacking: %v", err)
		}
		err := cc.Move(ctx, clusterctl.MoveOptions{
			ToKubeconfig:  clusterctl.Kubeconfig{Path: env.Target.KubeconfigPath, Context: env.Target.Name},
			FromDirectory: filepath.Join(dir, "objects"),
		})
		if err != nil {
			t.Fatalf("clusterctl move --from-directory: %v", err)
		}
		if d := snapshot.Diff(f.take(t, ctx, m.source, objectsOnly), f.take(t, ctx, m.target, objectsOnly)); d != "" {
			t.Errorf("the target differs from the source (-source +target):\n%s", d)
		}
		checkOwnerReferences(t, ctx, m.target, f, targetKinds(t, ctx, m.target))
	})
}

// assertNothingPaused fails for every Cluster of the fleet in c that is
// paused.
func assertNothingPaused(t *testing.T, ctx context.Context, c client.Client, f *testFleet) {
	t.Helper()
	for _, cl := range f.Clusters {
		u, err := get(ctx, c, clusterGVK, cl.Namespace, cl.Name)
		if err != nil {
			t.Errorf("reading Cluster %s/%s: %v", cl.Namespace, cl.Name, err)
			continue
		}
		if paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); paused {
			t.Errorf("Cluster %s/%s is left paused", cl.Namespace, cl.Name)
		}
	}
}
