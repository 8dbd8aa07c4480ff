package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"
	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backup"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planrecord"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// A restore is a MoveOperation whose source is an archive
// (spec.source.archive), created in the cluster the fleet is restored
// into: that cluster is its target. It runs on the move's phase table:
// Validating reads the archive (its integrity, its key) and checks it
// against the cluster (every kind served, nothing in the way, the
// creator's right to create it all) before anything stops; Recording and
// ScalingDown stop the cluster's providers as a move stops a target's;
// Copying creates the archive's objects in creation order, owner UIDs
// rewired and statuses carried, the plan and the copies recorded as a
// move records them, so that a run after a crash finishes what the last
// began; RestoringTarget brings the providers back and unpauses what the
// backup paused; a failure before that deletes only what the restore
// created (RollingBack). There is no source cluster: Deleting and
// RestoringSource are skipped (routes, nextInRestore).

func init() {
	validatingPhase.restoreSteps = []subStep{{name: "check", do: (*MoveOperationReconciler).validateRestore}}
	recordingPhase.restoreSteps = []subStep{
		{name: "record the controllers", do: (*MoveOperationReconciler).recordControllers},
	}
	scalingDownPhase.restoreSteps = []subStep{
		{name: "bypass", once: true, do: (*MoveOperationReconciler).bypassStep},
		{name: "stop", do: (*MoveOperationReconciler).stopStep},
	}
	copyingPhase.restoreSteps = []subStep{
		{name: "count the run", finished: func(mem *memo) bool { return !mem.copyStarted.IsZero() }, do: (*MoveOperationReconciler).startCopyRun},
		{name: "record the plan", preamble: bothBypasses, finished: func(mem *memo) bool { return mem.copyPlan != nil }, do: (*MoveOperationReconciler).startRestoring},
		{name: "count the progress", do: (*MoveOperationReconciler).countCopyProgress},
		{name: "copy the next group", preamble: bothBypasses, finished: func(mem *memo) bool { return mem.nextCopy >= len(mem.copyPlan.Groups) }, do: (*MoveOperationReconciler).copyNextGroup},
		// Every object is copied: what comes after reads the plan's record
		// and the status, never the archive.
		{name: "let go of the archive", do: (*MoveOperationReconciler).releaseArchive},
		{name: "check still stopped", preamble: targetOnly, do: (*MoveOperationReconciler).checkStillStopped},
	}
	restoringTargetPhase.restoreSteps = []subStep{
		{name: "restore the target", preamble: bothBypasses, do: (*MoveOperationReconciler).restoreTarget},
	}
	rollingBackPhase.restoreSteps = []subStep{
		{name: targetCleared, preamble: bothBypasses, once: true, do: (*MoveOperationReconciler).clearTarget},
		{name: "restore the target", preamble: bothBypasses, do: (*MoveOperationReconciler).restoreTargetInRollback},
	}
}

// localTarget is the cluster the operator runs in, as a restore's target.
func (r *MoveOperationReconciler) localTarget() *remote.Target {
	r.localOnce.Do(func() {
		r.local = &remote.Target{Client: r.Source, Server: "the cluster the operator runs in", Local: true}
	})
	return r.local
}

// restoreOf opens the archive a restore names and returns the restore of
// it into this cluster, kept in the run: an archive is checked whole once
// (its digest, its key, every file's hash), and its objects are read from
// its file as the restore asks for them, never held all at once. A problem a
// human fixes outside the MoveOperation (a Secret) is a finding to wait
// for; a damaged archive or a wrong key fails it.
func (r *MoveOperationReconciler) restoreOf(ctx context.Context, mo *movev1alpha1.MoveOperation) (*backup.Restore, *preflight.Finding, error) {
	mem := r.memoOf(mo.UID)
	if mem.restoring != nil {
		return mem.restoring, nil, nil
	}
	src := mo.Spec.Source.Archive
	var ids []age.Identity
	if ref := src.IdentitySecretRef; ref != nil {
		data, finding, err := r.archiveSecret(ctx, mo, ref.Name, ref.KeyOrDefault(), "spec.source.archive.identitySecretRef")
		if finding != nil || err != nil {
			return nil, finding, err
		}
		if ids, err = archive.ParseIdentities(data, fmt.Sprintf("Secret %s/%s key %s", mo.Namespace, ref.Name, ref.KeyOrDefault())); err != nil {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: err.Error() +
				"; put the archive's age private keys (AGE-SECRET-KEY-1..., one per line) there (the restore waits for them)"}, nil
		}
	}
	store, finding, err := r.archiveSourceStore(ctx, mo)
	if finding != nil || err != nil {
		return nil, finding, err
	}
	a, err := readArchive(ctx, store, src.Location, r.Archives.SpoolDirectory, ids)
	var unreachable *unreachableArchive
	if errors.As(err, &unreachable) {
		return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveUnreadable, Retry: true, Message: fmt.Sprintf(
			"the archive %s cannot be read: %v; check spec.source.archive.location and the store (the restore waits)", src.Location, unreachable.err)}, nil
	}
	if err != nil {
		return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveUnreadable, Message: fmt.Sprintf(
			"the archive %s: %v; nothing was written", src.Location, err)}, nil
	}
	rs := &backup.Restore{Archive: a, Target: r.Source, Operation: string(mo.UID), Options: r.Move}
	mem.restoring = rs
	return rs, nil, nil
}

// unreachableArchive: the archive could not be opened (as opposed to
// opened and found damaged, or not for the key given).
type unreachableArchive struct{ err error }

func (u *unreachableArchive) Error() string { return u.err.Error() }

// readArchive opens the archive at location in store: an archive file or
// artifact, or, in the archive directory, a directory of one object per
// file (clusterctl move --to-directory's, or an archive unpacked). An
// artifact is copied to a file of spoolDir first, encrypted as it was
// stored. The archive reads its objects from that file, which stays open
// until the copy is over (releaseArchive).
func readArchive(ctx context.Context, store backupstore.Store, location, spoolDir string, ids []age.Identity) (*archive.Archive, error) {
	if d, ok := store.(backupstore.Directory); ok {
		path := filepath.Join(d.Path, location)
		if filepath.IsAbs(location) {
			path = filepath.Clean(location)
		}
		// Only what is in the archive directory: a MoveOperation must not
		// have the operator read files of its own.
		if filepath.Dir(path) != filepath.Clean(d.Path) {
			return nil, &unreachableArchive{fmt.Errorf("%s is not an archive of the archive directory %s: name a file or directory in it", location, d.Path)}
		}
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			return archive.ReadDirectory(path)
		}
	}
	f, _, err := backupstore.OpenFile(ctx, store, location, spoolDir)
	if err != nil {
		return nil, &unreachableArchive{err}
	}
	return archive.OpenFile(f, ids...)
}

// releaseArchive closes the archive a restore read its objects from (and
// so frees what a registry's archive took in the spool directory): the
// copy is over, and a run that needs it again, after a restart, opens it
// again.
func (r *MoveOperationReconciler) releaseArchive(_ context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	if mem.restoring == nil {
		return done(), nil
	}
	err := mem.restoring.Archive.Close()
	mem.restoring = nil
	if err != nil {
		return outcome{}, fmt.Errorf("closing the archive: %w", err)
	}
	return done(), nil
}

// archiveSourceStore is the store a restore reads its archive from.
func (r *MoveOperationReconciler) archiveSourceStore(ctx context.Context, mo *movev1alpha1.MoveOperation) (backupstore.Store, *preflight.Finding, error) {
	src := mo.Spec.Source.Archive
	if src.Directory != nil {
		if r.Archives.Directory == "" {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveStoreUnusable, Message: "spec.source.archive.directory reads from the operator's archive directory, and it has none: " +
				"mount the volume that holds the archive in the operator's Pod and pass its path with --archive-directory (docs/disaster-recovery.md)"}, nil
		}
		return backupstore.Directory{Path: r.Archives.Directory}, nil, nil
	}
	store := backupstore.OCI{Repository: src.OCI.Repository, Insecure: src.OCI.Insecure, SpoolDir: r.Archives.SpoolDirectory, Auth: authn.Anonymous}
	if ref := src.OCI.CredentialsSecretRef; ref != nil {
		const field = "spec.source.archive.oci.credentialsSecretRef"
		data, finding, err := r.archiveSecret(ctx, mo, ref.Name, corev1.DockerConfigJsonKey, field)
		if finding != nil || err != nil {
			return nil, finding, err
		}
		auth, err := backupstore.AuthFromDockerConfig(data, src.OCI.Repository)
		if err != nil {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: fmt.Sprintf(
				"Secret %s/%s, which %s names: %v; make it a kubernetes.io/dockerconfigjson Secret with credentials for %s", mo.Namespace, ref.Name, field, err, src.OCI.Repository)}, nil
		}
		store.Auth = auth
	}
	return store, nil, nil
}

// validateRestore checks a restore before anything is written: its
// creator's rights over the spec, the archive (readable, with the key
// given), the plan of it against this cluster (checkRestorePlan), the
// creator's right to create all of it, and the operator's. Every problem
// is named; those a human fixes outside the MoveOperation are waited for.
func (r *MoveOperationReconciler) validateRestore(ctx context.Context, s *scope) (outcome, error) {
	mo := s.mo
	obj, refused, err := r.creatorObject(ctx, s)
	if err != nil {
		return outcome{}, err
	}
	if refused != nil {
		return *refused, nil
	}
	e := &preflight.Env{Object: obj, CreatorPolicy: r.creatorPolicy(), Source: r.Source, Spec: mo.Spec, UID: mo.UID, Namespace: mo.Namespace, ClaimNamespace: r.Claim.Namespace}
	if err := preflight.Evaluate(ctx, e, preflight.RestoreChecks()); err != nil {
		return outcome{}, err
	}
	if o, stop := verdict(e.Findings); stop {
		return o, nil
	}
	rs, finding, err := r.restoreOf(ctx, mo)
	if err != nil {
		return outcome{}, err
	}
	if finding != nil {
		finding.Check = "archive"
		o, _ := verdict([]preflight.Finding{*finding})
		return o, nil
	}
	if outside := namespacesNotNamed(rs.Archive, mo.Spec.Namespaces); len(outside) > 0 {
		return failWith(movev1alpha1.ReasonArchiveNotRestorable, fmt.Sprintf(
			"the archive was taken of namespaces %s, which spec.namespaces does not name; a restore restores the whole archive: name them too, or leave spec.namespaces out", strings.Join(outside, ", "))), nil
	}
	plan, kinds, failed, err := r.checkRestorePlan(ctx, s, obj, rs)
	if err != nil {
		return outcome{}, err
	}
	if failed != nil {
		return *failed, nil
	}
	missing, err := access.Check(ctx, map[movev1alpha1.ClusterRole]client.Client{movev1alpha1.ClusterTarget: r.Source},
		access.Needs(access.Move{TargetKinds: access.KindsOf(kinds), Namespace: mo.Namespace, ClaimNamespace: r.Claim.Namespace}), access.DefaultConcurrency)
	if err != nil {
		return outcome{}, fmt.Errorf("checking the operator's access: %w", err)
	}
	if len(missing) > 0 {
		return failWith(movev1alpha1.ReasonAccessDenied, "a restore's target is the cluster the operator runs in, where the operator creates what a move creates in a target: bind it the target's ClusterRole there "+
			"(kubectl apply -f dist/target-access.yaml, then kubectl create clusterrolebinding move-operator-restore --clusterrole=move-operator-target --serviceaccount=<the operator's namespace>:<its ServiceAccount>); "+
			access.Message(missing)), nil
	}
	mo.Status.Progress = &movev1alpha1.MoveProgress{Total: int32(plan.Len())}
	mo.Status.RestoredPausesOf = rs.Archive.Index.PausedBy
	if mo.Status.RestoredPausesOf == "" {
		mo.Status.RestoredPausesOf = string(mo.UID)
	}
	return done(), nil
}

// checkRestorePlan plans the archive against this cluster (every kind
// served, at a version the operator can write it at; nothing in the way)
// and asks whether the creator may create all of it. It returns the plan
// and the kinds this cluster serves, or the outcome that ends the restore.
// The plan and the versions go in the status, as a move's do, except to a
// creator refused: what the archive holds is not shown to someone who may
// not create it.
func (r *MoveOperationReconciler) checkRestorePlan(ctx context.Context, s *scope, obj metav1.Object, rs *backup.Restore) (*graph.Plan, *graph.Types, *outcome, error) {
	mo := s.mo
	fail := func(reason, message string) (*graph.Plan, *graph.Types, *outcome, error) {
		o := failWith(reason, message)
		return nil, nil, &o, nil
	}
	kinds, err := graph.DiscoverTypes(ctx, r.Source)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("discovering the kinds this cluster serves: %w", err)
	}
	status := &movev1alpha1.MovePlan{Versions: preflight.StatusOf(rs.Versions(kinds))}
	plan, err := rs.Plan(ctx, kinds)
	switch {
	case errors.Is(err, backup.ErrNotServed), errors.Is(err, backup.ErrNotRestorable):
		mo.Status.Plan = status
		return fail(movev1alpha1.ReasonArchiveNotRestorable, err.Error()+"; nothing was written")
	case err != nil:
		return nil, nil, nil, err
	}
	user, err := creator.Of(obj)
	if err != nil {
		return fail(movev1alpha1.ReasonCreatorUnknown, err.Error())
	}
	refusal, err := creator.AskRestore(ctx, r.Source, user, plan)
	if err != nil {
		return nil, nil, nil, err
	}
	if refusal != "" {
		return fail(movev1alpha1.ReasonCreatorNotAllowed, refusal)
	}
	mo.Status.Plan = plan.Summary()
	mo.Status.Plan.Versions = status.Versions
	err = rs.Check(ctx, plan)
	switch {
	case errors.Is(err, backup.ErrInTheWay):
		return fail(movev1alpha1.ReasonTargetConflict, err.Error()+"; nothing was written")
	case err != nil:
		return nil, nil, nil, err
	}
	return plan, kinds, nil, nil
}

// namespacesNotNamed returns the namespaces the archive was taken of (its
// backup's spec.namespaces; those of its objects when it names none) that
// named does not hold; none when named is empty (every namespace). Objects
// the backup's graph reached in other namespaces (an identity's
// credentials in a provider's namespace) come with them, as in a move: the
// creator's right to create them is asked of each (creator.AskRestore).
func namespacesNotNamed(a *archive.Archive, named []string) []string {
	if len(named) == 0 {
		return nil
	}
	taken := a.Index.Namespaces
	if len(taken) == 0 {
		for _, e := range a.Index.Objects {
			if e.Namespace != "" {
				taken = append(taken, e.Namespace)
			}
		}
	}
	var out []string
	for _, ns := range taken {
		if !slices.Contains(named, ns) && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// startRestoring records the restore's plan (or reads it back after a
// restart) and prepares the copier from the archive: the move's Copier,
// which carries statuses, recognises the copies an earlier run recorded,
// and records each group's as it goes, in this cluster.
func (r *MoveOperationReconciler) startRestoring(ctx context.Context, s *scope) (outcome, error) {
	mo, mem := s.mo, r.memoOf(s.mo.UID)
	rs, finding, err := r.restoreOf(ctx, mo)
	if err != nil {
		return outcome{}, err
	}
	if finding != nil {
		return outcome{}, fmt.Errorf("%s (changed since the restore validated)", finding.Message)
	}
	kinds, err := graph.DiscoverTypes(ctx, r.Source)
	if err != nil {
		return outcome{}, err
	}
	plan, found, err := planrecord.Load(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return outcome{}, err
	}
	if !found {
		if plan, err = rs.Plan(ctx, kinds); err != nil {
			return outcome{}, err
		}
		if err := planrecord.Save(ctx, r.Source, mo, plan); err != nil {
			return outcome{}, err
		}
	}
	copies, err := planrecord.LoadCopies(ctx, r.Source, mo.Namespace, mo.UID)
	if err != nil {
		return outcome{}, err
	}
	rs.Copies = copies
	rs.OnCopied = func(ctx context.Context, group int, uids []types.UID) error {
		return planrecord.SaveCopies(ctx, r.Source, mo, group, uids)
	}
	mem.copyPlan, mem.copier, mem.nextCopy = plan, rs.Copier(plan, kinds), 0
	return done(), nil
}

// pausedByOf is the operation whose pauses a restore's objects carry (the
// backup's, as the archive's index names it; this restore's for an
// archive clusterctl wrote), or, in a move, the move's own.
func (r *MoveOperationReconciler) pausedByOf(ctx context.Context, s *scope) (string, error) {
	if !s.mo.Spec.IsRestore() {
		return string(s.mo.UID), nil
	}
	if by := s.mo.Status.RestoredPausesOf; by != "" {
		return by, nil // recorded in Validating: the store may be away now
	}
	rs, finding, err := r.restoreOf(ctx, s.mo)
	if err != nil {
		return "", err
	}
	if finding != nil {
		return "", fmt.Errorf("reading the archive again for the pauses it resumes: %s", finding.Message)
	}
	if by := rs.Archive.Index.PausedBy; by != "" {
		return by, nil
	}
	return string(s.mo.UID), nil
}
