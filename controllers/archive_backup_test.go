//go:build cluster

package controllers_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/google/go-containerregistry/pkg/authn"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/registry"
	"github.com/move-operator/move-operator/test/snapshot"
)

// TestABackupWritesTheFleetToAnEncryptedArchiveAndLeavesTheSourceAsItWas:
// a MoveOperation whose target is an archive goes through the move's
// phases but Deleting and RestoringTarget, stops and restores the source's
// controllers as a move does, and writes every object the move would take,
// with its status, to an archive encrypted to the Secret's key, in the
// operator's archive directory and in a registry (pinned by digest). The
// source is left as it was: nothing deleted, nothing left paused,
// controllers at their replicas.
func TestABackupWritesTheFleetToAnEncryptedArchiveAndLeavesTheSourceAsItWas(t *testing.T) {
	movetest.EnsureSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	prefix := "backup-" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	movetest.SetProviderReplicas(t, movetest.Env.Source, capiprovider.CoreProvider, 2)

	stateBefore := movetest.StateOf(ctx, g)
	sourceBefore := movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces)
	withStatus, err := snapshot.Take(ctx, movetest.Env.Source.Client, snapshot.Options{Namespaces: f.Namespaces, Status: true,
		IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation}})
	g.Expect(err).NotTo(HaveOccurred())

	dir := t.TempDir()
	movetest.StartOperator(t, movetest.OperatorOptions{Archives: controllers.Archives{Directory: dir, SpoolDirectory: t.TempDir()}})
	ns := movetest.OpsNamespace(t)
	id, keys, _ := movetest.BackupKeys(t, ns)
	mo := movetest.NewMoveOperation(t, ns, "nightly", movev1alpha1.MoveOperationSpec{
		Target:     movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, RecipientsSecretRef: keys}},
		Namespaces: f.Namespaces,
	})
	done, seen := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)

	t.Run("it went through the move's phases but those of a target cluster", func(t *testing.T) {
		g := NewWithT(t)
		var phases []movev1alpha1.MovePhase
		for _, tr := range done.Status.PhaseTransitions {
			phases = append(phases, tr.Phase)
		}
		g.Expect(phases).To(Equal(controllers.PathOf(done)))
		g.Expect(phases).NotTo(ContainElements(movev1alpha1.PhaseDeleting, movev1alpha1.PhaseRestoringTarget))
		g.Expect(seen).To(HaveKey(status.InProgressStatus))
		g.Expect(movetest.KstatusOf(g, done)).To(Equal(status.CurrentStatus))
		g.Expect(done.Status.Controllers).NotTo(BeEmpty())
		for _, c := range done.Status.Controllers {
			g.Expect(c.Cluster).To(Equal(movev1alpha1.ClusterSource), "a backup stops no controller of a target")
		}
	})

	t.Run("the status says where the archive is and how long the providers were stopped", func(t *testing.T) {
		g := NewWithT(t)
		a := done.Status.Archive
		g.Expect(a).NotTo(BeNil())
		g.Expect(filepath.Dir(a.Location)).To(Equal(dir))
		g.Expect(a.Encrypted).To(BeTrue())
		g.Expect(a.Objects).To(Equal(int32(len(sourceBefore.Objects))))
		g.Expect(a.ControllersStoppedFor).NotTo(BeNil())
		g.Expect(a.ControllersStoppedFor.Duration).To(BeNumerically(">", 0))
		data, err := os.ReadFile(a.Location)
		g.Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(data)
		g.Expect(a.Digest).To(Equal("sha256:" + hex.EncodeToString(sum[:])))
		g.Expect(a.Size).To(Equal(int64(len(data))))
	})

	t.Run("the archive holds what the move would take, statuses included, and only its key reads it", func(t *testing.T) {
		g := NewWithT(t)
		got := readArchive(t, done.Status.Archive.Location, id)
		g.Expect(got.Index.PausedBy).To(Equal(string(done.UID)))
		other, _ := age.GenerateX25519Identity()
		_, err := readArchiveErr(done.Status.Archive.Location, other)
		g.Expect(err).To(HaveOccurred(), "another key must not read the archive")

		opts := snapshot.Options{Status: true, IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation}}
		archived := map[snapshot.Key]snapshot.Object{}
		for _, u := range got.Objects() {
			o := snapshot.Normalize(u, opts)
			archived[o.Key()] = o
		}
		g.Expect(archived).To(HaveLen(len(withStatus.Objects)))
		for _, want := range withStatus.Objects {
			o, ok := archived[want.Key()]
			g.Expect(ok).To(BeTrue(), "%s is not in the archive", want.Key())
			if want.Kind == "Cluster.cluster.x-k8s.io" {
				// Archived as the backup paused it, for a restore to
				// resume; the rest of its spec is the source's.
				g.Expect(o.Content["spec"]).To(HaveKeyWithValue("paused", true))
				continue
			}
			g.Expect(o.Content).To(Equal(want.Content), "%s", want.Key())
			if want.Status == nil {
				g.Expect(o.Status).To(BeNil(), "the status of %s", want.Key())
				continue
			}
			g.Expect(o.Status).To(Equal(want.Status), "the status of %s", want.Key())
		}
	})

	t.Run("the source is as it was, its controllers back", func(t *testing.T) {
		g := NewWithT(t)
		sourceAfter := movetest.Take(ctx, g, movetest.Env.Source, f.Namespaces)
		g.Expect(snapshot.Diff(sourceBefore, sourceAfter)).To(BeEmpty())
		movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Source.Client, f.Namespaces)
		g.Expect(movetest.StateOf(ctx, g)).To(Equal(stateBefore))
		for _, c := range f.Clusters {
			cl := &clusterv1.Cluster{}
			g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, cl)).To(Succeed())
			g.Expect(ptr.Deref(cl.Spec.Paused, false)).To(BeFalse(), "Cluster %s/%s is unpaused", c.Namespace, c.Name)
		}
	})

	t.Run("to a registry, pinned by digest, with the Secret's credentials", func(t *testing.T) {
		g := NewWithT(t)
		reg, err := registry.Start(ctx, t.TempDir(), registry.Options{User: "backup", Password: "s3cret"})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(reg.Stop)
		repository := reg.Host + "/fleet/backups"
		auth := base64.StdEncoding.EncodeToString([]byte("backup:s3cret"))
		config, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
		movetest.NewSecret(t, ns, "registry", map[string][]byte{corev1.DockerConfigJsonKey: config})
		mo := movetest.NewMoveOperation(t, ns, "to-registry", movev1alpha1.MoveOperationSpec{
			Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
				OCI:                 &movev1alpha1.OCIStore{Repository: repository, CredentialsSecretRef: &movev1alpha1.LocalSecretReference{Name: "registry"}},
				RecipientsSecretRef: keys,
			}},
			Namespaces: f.Namespaces,
		})
		done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)
		a := done.Status.Archive
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.Location).To(Equal(repository + "@" + a.Digest))
		store := backupstore.OCI{Repository: repository, Auth: &authn.Basic{Username: "backup", Password: "s3cret"}}
		rc, err := store.Open(ctx, a.Location)
		g.Expect(err).NotTo(HaveOccurred())
		defer rc.Close()
		got, err := archive.Read(rc, id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Objects()).To(HaveLen(len(sourceBefore.Objects)))
	})
}

// TestABackupRefusesWhatItCannotWriteBeforeItStopsAnything: a backup to a
// directory the operator was not given fails in Validating, naming the
// flag; one whose key Secret is missing waits for it, Stalled, and goes on
// once it is there. Neither stops a controller before.
func TestABackupRefusesWhatItCannotWriteBeforeItStopsAnything(t *testing.T) {
	movetest.EnsureSetup(t)
	g := NewWithT(t)
	prefix := "nobackup-" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(0), Namespaces: []string{prefix}, Name: prefix})
	dir := t.TempDir()
	movetest.StartOperator(t, movetest.OperatorOptions{Archives: controllers.Archives{SpoolDirectory: dir}})
	ns := movetest.OpsNamespace(t)

	noDir := movetest.NewMoveOperation(t, ns, "no-directory", movev1alpha1.MoveOperationSpec{
		Target:     movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, Unencrypted: true}},
		Namespaces: f.Namespaces,
	})
	failed, _ := movetest.WaitForPhase(t, noDir, movev1alpha1.PhaseFailed, 2*time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonArchiveStoreUnusable))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("--archive-directory"))
	movetest.AssertNothingWritten(g, failed)

	noKeys := movetest.NewMoveOperation(t, ns, "no-keys", movev1alpha1.MoveOperationSpec{
		Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
			OCI: &movev1alpha1.OCIStore{Repository: "127.0.0.1:1/never"}, RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "later", Key: "recipients"},
		}},
		Namespaces: f.Namespaces,
	})
	g.Eventually(func(g Gomega) {
		got := movetest.Get(g, noKeys)
		g.Expect(movetest.KstatusOf(g, got)).To(Equal(status.FailedStatus))
		stalled := findCondition(got.Status.Conditions, movev1alpha1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(movev1alpha1.ReasonArchiveSecretUnusable))
		g.Expect(stalled.Message).To(ContainSubstring("later"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	movetest.AssertNothingWritten(g, noKeys)
	movetest.DeleteMoveOperation(t, noKeys) // it holds the source's claim while it waits

	// A registry that refuses the credentials is found before anything
	// stops, not after the copy timeout.
	reg, err := registry.Start(context.Background(), t.TempDir(), registry.Options{User: "backup", Password: "s3cret"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(reg.Stop)
	wrong, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("backup:wrong"))}}})
	movetest.NewSecret(t, ns, "wrong-registry", map[string][]byte{corev1.DockerConfigJsonKey: wrong})
	refused := movetest.NewMoveOperation(t, ns, "refused-by-registry", movev1alpha1.MoveOperationSpec{
		Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
			OCI: &movev1alpha1.OCIStore{Repository: reg.Host + "/fleet", CredentialsSecretRef: &movev1alpha1.LocalSecretReference{Name: "wrong-registry"}}, Unencrypted: true,
		}},
		Namespaces: f.Namespaces,
	})
	g.Eventually(func(g Gomega) {
		got := movetest.Get(g, refused)
		stalled := findCondition(got.Status.Conditions, movev1alpha1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(movev1alpha1.ReasonArchiveStoreUnusable))
		g.Expect(stalled.Message).To(ContainSubstring("refused the credentials"))
		g.Expect(stalled.Message).NotTo(ContainSubstring("wrong"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	movetest.AssertNothingWritten(g, refused)
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func readArchive(t *testing.T, path string, id age.Identity) *archive.Archive {
	t.Helper()
	a, err := readArchiveErr(path, id)
	if err != nil {
		t.Fatalf("reading the archive %s: %v", path, err)
	}
	return a
}

func readArchiveErr(path string, id age.Identity) (*archive.Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return archive.Read(f, id)
}

// A BackupSchedule takes its backups as the operator, each held to the
// schedule's creator's rights, and says which succeeded last.
func TestABackupScheduleTakesBackupsOnItsCreatorsBehalf(t *testing.T) {
	movetest.EnsureSetup(t)
	g := NewWithT(t)
	ctx := context.Background()
	prefix := "sched-" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(0), Namespaces: []string{prefix}, Name: prefix})
	dir := t.TempDir()
	movetest.StartOperator(t, movetest.OperatorOptions{Archives: controllers.Archives{Directory: dir, SpoolDirectory: t.TempDir()}})
	ns := movetest.OpsNamespace(t)
	_, keys, _ := movetest.BackupKeys(t, ns)
	bs := &movev1alpha1.BackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec:       movev1alpha1.BackupScheduleSpec{Schedule: "* * * * *", Template: movetest.BackupSpec(keys, f.Namespaces)},
	}
	g.Expect(movetest.Client.Create(ctx, bs)).To(Succeed())
	t.Cleanup(func() {
		_ = movetest.Client.Delete(context.Background(), bs)
		backups := &movev1alpha1.MoveOperationList{}
		_ = movetest.Client.List(context.Background(), backups, client.InNamespace(ns))
		for i := range backups.Items {
			movetest.DeleteMoveOperation(t, &backups.Items[i])
		}
	})
	var got movev1alpha1.BackupSchedule
	g.Eventually(func(g Gomega) {
		g.Expect(movetest.Client.Get(ctx, client.ObjectKeyFromObject(bs), &got)).To(Succeed())
		g.Expect(got.Status.LastSuccessfulBackup).NotTo(BeNil())
	}, 3*time.Minute, time.Second).Should(Succeed(), "a backup is taken within the minute and succeeds")
	g.Expect(got.Status.LastSuccessfulBackup.Location).To(HavePrefix(dir + "/"))
	ready := findCondition(got.Status.Conditions, movev1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	backup := &movev1alpha1.MoveOperation{}
	g.Expect(movetest.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.LastSuccessfulBackup.Name}, backup)).To(Succeed())
	g.Expect(backup.Labels).To(HaveKeyWithValue(movev1alpha1.BackupScheduleLabel, bs.Name))
	g.Expect(backup.Annotations).To(HaveKeyWithValue(movev1alpha1.CreatedByAnnotation, movetest.OperatorIdentity.Username),
		"the operator creates the backup; the schedule's creator is who it is held to")
}
