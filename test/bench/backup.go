package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/installed"
	usermove "github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/testenv"
)

// -backup (make bench-backup) measures backups and restores, not moves.
// For each N, on a fresh pair of local management clusters, it creates one
// fleet per tool in the source, backs each up with its tool, then restores
// each with its tool into the other cluster, which has never held it:
//
//   - clusterctl: `clusterctl move --to-directory DIR --namespace NS`
//     against the source, then `clusterctl move --from-directory DIR`
//     against the other cluster, through clusterctl's Go library with the
//     clusters' admin kubeconfigs, as users run it;
//   - the operator: a MoveOperation in the source whose target is an
//     archive (spec.target.archive.directory, encrypted to an age
//     recipient in a Secret, as users back up by default), handled by the
//     operator as installed in the source with --archive-directory; then a
//     MoveOperation in the other cluster whose source is that archive
//     (spec.source.archive, the age identity in a Secret there), handled
//     by the operator as installed in that cluster, its ServiceAccount
//     bound to the ClusterRole move-operator-target of
//     dist/target-access.yaml, as docs/disaster-recovery.md tells users.
//     Both operators are given the same archive directory, as one volume
//     moved from one cluster to the other; each is a fresh process, so its
//     peak RSS belongs to that backup or restore alone.
//
// Each result is checked: the source's namespaces hold after the backup
// what they held before it, the backup holds at least every object
// counted there, and after the restore the other cluster's namespaces
// hold, kind by kind, what the source's held. Then, with -rss-n, the
// operator's backup of a fleet of that size alone, for its peak RSS.

// make bench-backup's sizes and repetitions.
const (
	backupSizes = "1,30,100"
	backupReps  = "1"
)

const (
	// opBackup and opRestore are what an archiveResult measured.
	opBackup  = "backup"
	opRestore = "restore"
	// backupKeysSecret holds, in the source's moveNamespace, the age
	// recipient the operator's backups are encrypted to, under
	// recipientsKey; restoreKeySecret holds, in the other cluster's, the
	// identity that reads them, under identityKey.
	backupKeysSecret = "backup-keys"
	recipientsKey    = "recipients"
	restoreKeySecret = "restore-key"
	identityKey      = "identity"
	// restoreBindingName binds the target's ClusterRole to the operator in
	// the cluster restored into.
	restoreBindingName = "move-operator-restore"
	targetClusterRole  = "move-operator-target"
)

// archiveResult is one backup or one restore of one fleet by one tool.
type archiveResult struct {
	tool string
	// op is opBackup or opRestore.
	op     string
	n, rep int
	// position is the order of the backup (or restore) among its
	// repetition's (1: first).
	position int
	// objects is, for a backup, how many objects it holds (the
	// operator's status.archive.objects, clusterctl's files); for a
	// restore, how many objects of the counted kinds the restored
	// namespaces hold, checked equal to the source's.
	objects int
	// bytes is the size of the archive, or of clusterctl's directory.
	bytes int64
	wall  time.Duration
	// peakRSS is the operator's (VmHWM of its process); peakHeap the
	// largest live heap its profiles showed (-heap-profile only);
	// fileRSS how much of its resident set, at the end, was its binary's
	// own pages (RssFile).
	peakRSS, peakHeap, fileRSS uint64
	// phases are the operator's, as its MoveOperation went through them.
	phases []phaseSpan
	// rssOnly marks the -rss-n backup, made for its peak RSS alone.
	rssOnly bool
}

// backupRun is what -backup keeps across sizes.
type backupRun struct {
	b   *bench
	key *age.X25519Identity
	// archives is the operator's archive directory, in both clusters.
	archives string
	ctl      clusterctl.Client
	results  []*archiveResult
	// floorResults are the restore's floors (backupfloor.go).
	floorResults []*restoreFloor
	// measured are the sizes measured whole; failure ends the run.
	measured []int
	failure  error
	// per-pair state: the client of the cluster restored into and the
	// operator's identity there.
	target   client.WithWatch
	targetID *installed.Identity
}

// runBackups runs every size, then the -rss-n backup, writing the page
// after each so that a run stopped midway leaves what it measured.
func (b *bench) runBackups(ctx context.Context) error {
	key, err := age.GenerateX25519Identity()
	if err != nil {
		return err
	}
	r := &backupRun{b: b, key: key, archives: filepath.Join(b.workDir, "archives")}
	if err := os.MkdirAll(r.archives, 0o700); err != nil {
		return err
	}
	if r.ctl, err = usermove.NewClusterctlClient(ctx, b.workDir); err != nil {
		return err
	}
	err = r.runAll(ctx)
	r.failure = err
	b.machine.loadAfter = loadAverage()
	rep := r.report(time.Since(b.began), true)
	fmt.Print("\n" + rep.text())
	if writeErr := r.writePage(rep); writeErr != nil {
		return errors.Join(err, writeErr)
	}
	return err
}

func (r *backupRun) runAll(ctx context.Context) error {
	for _, n := range r.b.opts.sizes {
		if err := r.runSize(ctx, n); err != nil {
			return fmt.Errorf("fleets of %d clusters: %w", n, err)
		}
		r.measured = append(r.measured, n)
		if err := r.writePage(r.report(time.Since(r.b.began), false)); err != nil {
			return err
		}
	}
	if n := r.b.opts.rssN; n > 0 {
		if err := r.runRSS(ctx, n); err != nil {
			return fmt.Errorf("the operator's backup of %d clusters for its peak RSS: %w", n, err)
		}
	}
	return nil
}

// writePage writes the page to -out, if given.
func (r *backupRun) writePage(rep *backupReport) error {
	if r.b.out == "" {
		return nil
	}
	if err := os.WriteFile(r.b.out, []byte(rep.page()), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	say("report written to %s", r.b.out)
	return nil
}

func (r *backupRun) report(elapsed time.Duration, finished bool) *backupReport {
	return &backupReport{opts: r.b.opts, machine: r.b.machine, results: r.results, floors: r.floorResults, measured: r.measured,
		finished: finished, failure: r.failure, elapsed: elapsed}
}

// runSize measures every repetition at n on a fresh pair of clusters:
// both tools back up a fleet each, then restore it into the other cluster.
func (r *backupRun) runSize(ctx context.Context, n int) error {
	return r.b.withClusters(ctx, n, func(c *clusters) error {
		if err := r.prepareClusters(ctx, c); err != nil {
			return err
		}
		reps := r.b.opts.repetitions(n)
		for rep := 1; rep <= reps; rep++ {
			step("N=%d, repetition %d/%d: creating the fleets", n, rep, reps)
			fleets, err := c.createFleets(ctx, n, rep, movers{clusterctl: true})
			if err != nil {
				return err
			}
			sources := make([]*placement, len(fleets))
			locations := make([]string, len(fleets))
			for i, f := range fleets {
				if sources[i], locations[i], err = r.backup(ctx, c, f, n, rep, i+1); err != nil {
					return fmt.Errorf("repetition %d, %s's backup: %w", rep, f.tool, err)
				}
			}
			for i, f := range fleets {
				if err := r.restore(ctx, c, f, sources[i], locations[i], n, rep, i+1); err != nil {
					return fmt.Errorf("repetition %d, %s's restore: %w", rep, f.tool, err)
				}
			}
			for i, f := range fleets {
				if f.tool == toolOperator {
					r.measureFloors(ctx, c, locations[i], n, rep)
				}
			}
		}
		return nil
	})
}

// runRSS backs up a fleet of n clusters with the operator alone, on a
// pair of its own, for its peak RSS.
func (r *backupRun) runRSS(ctx context.Context, n int) error {
	return r.b.withClusters(ctx, n, func(c *clusters) error {
		if err := r.prepareClusters(ctx, c); err != nil {
			return err
		}
		step("N=%d: creating the operator's fleet alone, for the peak RSS of its backup", n)
		began := time.Now()
		f, err := c.createFleet(ctx, toolOperator, n, 1)
		if err != nil {
			return err
		}
		say("  a fleet of %d objects in %s", f.fleet.Total(), time.Since(began).Round(time.Second))
		_, _, err = r.backupAs(ctx, c, f, &archiveResult{tool: toolOperator, op: opBackup, n: n, rep: 1, position: 1, rssOnly: true})
		return err
	})
}

// prepareClusters sets up, untimed, what users set up once: the Secret of
// the backups' recipient in the source; in the other cluster the
// MoveOperation CRD, the operator installed as dist/install.yaml installs
// it, its ServiceAccount bound to the target's ClusterRole, and the Secret
// of the identity that reads the archives.
func (r *backupRun) prepareClusters(ctx context.Context, c *clusters) error {
	env := c.env
	if err := putSecret(ctx, c.source, backupKeysSecret, recipientsKey,
		"# the bench's backup key\n"+r.key.Recipient().String()+"\n"); err != nil {
		return fmt.Errorf("the source: %w", err)
	}
	scheme := capiprovider.NewScheme()
	utilruntime.Must(movev1alpha1.AddToScheme(scheme))
	var err error
	if r.target, err = client.NewWithWatch(env.Target.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("creating a client for the target: %w", err)
	}
	if _, err := envtest.InstallCRDs(env.Target.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(r.b.root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the MoveOperation CRD in the target: %w", err)
	}
	dir, err := os.MkdirTemp(r.b.workDir, "identity-target-")
	if err != nil {
		return err
	}
	if r.targetID, err = r.b.install.Grant(ctx, env.Target.Config, dir); err != nil {
		return fmt.Errorf("installing the operator's identity in the target: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: restoreBindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: targetClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: r.targetID.Namespace, Name: r.targetID.ServiceAccount}},
	}
	if err := r.target.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to the operator in the target: %w", targetClusterRole, err)
	}
	if err := putSecret(ctx, r.target, restoreKeySecret, identityKey, r.key.String()+"\n"); err != nil {
		return fmt.Errorf("the target: %w", err)
	}
	return nil
}

// putSecret creates a Secret of one key in moveNamespace.
func putSecret(ctx context.Context, c client.Client, name, key, value string) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: name},
		Data:       map[string][]byte{key: []byte(value)},
	}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", moveNamespace, name, err)
	}
	return nil
}

// backup backs f up with its tool and returns what the source held (the
// restore is checked against it) and where the backup is.
func (r *backupRun) backup(ctx context.Context, c *clusters, f benchFleet, n, rep, position int) (*placement, string, error) {
	res := &archiveResult{tool: f.tool, op: opBackup, n: n, rep: rep, position: position}
	return r.backupAs(ctx, c, f, res)
}

func (r *backupRun) backupAs(ctx context.Context, c *clusters, f benchFleet, res *archiveResult) (*placement, string, error) {
	before, err := c.place(ctx, f)
	if err != nil {
		return nil, "", err
	}
	global, err := r.globals(ctx, c, c.env.Source, f)
	if err != nil {
		return nil, "", err
	}
	counted := before.source.total() + before.sourceClasses.total() + global
	var location string
	switch f.tool {
	case toolClusterctl:
		location, err = r.clusterctlBackup(ctx, f, res)
	default:
		location, err = r.operatorBackup(ctx, c, f, res)
	}
	if err != nil {
		return nil, "", err
	}
	after, err := c.place(ctx, f)
	if err != nil {
		return nil, "", err
	}
	if err := verifyBackup(before, after, res.objects, counted); err != nil {
		return nil, "", err
	}
	r.results = append(r.results, res)
	say("  %s", res.line())
	return before, location, nil
}

// verifyBackup fails unless the backup left the source's namespaces as
// they were and holds at least the objects counted there.
func verifyBackup(before, after *placement, objects, counted int) error {
	var problems []string
	if counted == 0 {
		problems = append(problems, "the source's namespaces were empty")
	}
	if d := after.source.diff(before.source); d != "" {
		problems = append(problems, "the source namespace now holds "+d)
	}
	if d := after.sourceClasses.diff(before.sourceClasses); d != "" {
		problems = append(problems, "the source's ClusterClass namespace now holds "+d)
	}
	if objects < counted {
		problems = append(problems, fmt.Sprintf("the backup holds %d objects, fewer than the %d counted in the source's namespaces", objects, counted))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the backup is not what it should be: %s", joinWords(problems))
	}
	return nil
}

// clusterctlBackup runs `clusterctl move --to-directory DIR --namespace
// NS` against the source; the backup is the directory.
func (r *backupRun) clusterctlBackup(ctx context.Context, f benchFleet, res *archiveResult) (string, error) {
	dir := filepath.Join(r.b.workDir, "clusterctl-"+f.namespace)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	src := r.b.clusters.env.Source
	began := time.Now()
	err := r.ctl.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: src.KubeconfigPath, Context: src.Name},
		Namespace:      f.namespace,
		ToDirectory:    dir,
	})
	res.wall = time.Since(began)
	if err != nil {
		return "", fmt.Errorf("clusterctl move --to-directory %s --namespace %s: %w", dir, f.namespace, err)
	}
	if res.objects, res.bytes, err = directoryFiles(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// directoryFiles counts the files of dir and their bytes: clusterctl
// writes one file per object.
func directoryFiles(dir string) (int, int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	var files int
	var size int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return 0, 0, err
		}
		files++
		size += info.Size()
	}
	return files, size, nil
}

// operatorBackup creates in the source a MoveOperation whose target is an
// encrypted archive in the operator's archive directory, handled by a
// fresh operator, and returns the archive's name there.
func (r *backupRun) operatorBackup(ctx context.Context, c *clusters, f benchFleet, res *archiveResult) (string, error) {
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: "backup-" + f.namespace},
		Spec: movev1alpha1.MoveOperationSpec{
			Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{
				Directory:           &movev1alpha1.DirectoryStore{},
				RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: backupKeysSecret, Key: recipientsKey},
			}},
			Namespaces: []string{f.namespace},
		},
	}
	done, err := r.operate(ctx, c.source, c.identity, mo, "operator-backup-"+f.namespace+".log", res)
	if err != nil {
		return "", err
	}
	a := done.Status.Archive
	if a == nil || a.Location == "" {
		return "", fmt.Errorf("MoveOperation %s is Done without status.archive", mo.Name)
	}
	if !a.Encrypted {
		return "", fmt.Errorf("MoveOperation %s wrote an archive in the clear", mo.Name)
	}
	res.objects, res.bytes = int(a.Objects), a.Size
	return filepath.Base(a.Location), nil
}

// restore restores f's backup with its tool into the target, and checks
// that the target's namespaces hold what the source's held.
func (r *backupRun) restore(ctx context.Context, c *clusters, f benchFleet, source *placement, location string, n, rep, position int) error {
	res := &archiveResult{tool: f.tool, op: opRestore, n: n, rep: rep, position: position}
	before, err := c.place(ctx, f)
	if err != nil {
		return err
	}
	if held := before.target.total() + before.targetClasses.total(); held != 0 {
		return fmt.Errorf("the target's namespaces held %d objects before the restore", held)
	}
	switch f.tool {
	case toolClusterctl:
		err = r.clusterctlRestore(ctx, location, res)
	default:
		err = r.operatorRestore(ctx, f, location, res)
	}
	if err != nil {
		return err
	}
	if res.objects, err = r.verifyRestore(ctx, c, f, source); err != nil {
		return err
	}
	r.results = append(r.results, res)
	say("  %s", res.line())
	return nil
}

// verifyRestore waits until the target's namespaces hold, kind by kind,
// what the source's held (the controller-manager adds each new
// namespace's kube-root-ca.crt ConfigMap a moment after it is created),
// and returns how many objects they hold.
func (r *backupRun) verifyRestore(ctx context.Context, c *clusters, f benchFleet, source *placement) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		after, err := c.place(ctx, f)
		if err != nil {
			return 0, err
		}
		global, err := r.globals(ctx, c, c.env.Target, f)
		if err != nil {
			return 0, err
		}
		d, dc := after.target.diff(source.source), after.targetClasses.diff(source.sourceClasses)
		if d == "" && dc == "" && global == 2*len(f.fleet.Identities) {
			return after.target.total() + after.targetClasses.total() + global, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("30 s after the restore the target's namespace holds %s; its ClusterClass namespace holds %s; "+
				"of the fleet's %d cluster-scoped identities and their credentials Secrets it holds %d",
				orNone(d), orNone(dc), len(f.fleet.Identities), global)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// globals counts, in m, the fleet's objects outside its namespaces: its
// cluster-scoped LoopClusterIdentities and their credentials Secrets in
// the provider's namespace, which both tools back up and restore with it.
func (r *backupRun) globals(ctx context.Context, c *clusters, m *testenv.Management, f benchFleet) (int, error) {
	var identity schema.GroupVersionKind
	for _, gvk := range c.types {
		if gvk.Kind == capiprovider.LoopClusterIdentityKind {
			identity = gvk
		}
	}
	if identity.Kind == "" {
		return 0, fmt.Errorf("no %s among the kinds moved", capiprovider.LoopClusterIdentityKind)
	}
	n := 0
	for _, name := range f.fleet.Identities {
		id := &metav1.PartialObjectMetadata{}
		id.SetGroupVersionKind(identity)
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		for _, o := range []struct {
			obj client.Object
			key client.ObjectKey
		}{{id, client.ObjectKey{Name: name}}, {secret, client.ObjectKey{Namespace: fleet.ProviderNamespace, Name: name + "-credentials"}}} {
			err := m.Client.Get(ctx, o.key, o.obj)
			switch {
			case err == nil:
				n++
			case !apierrors.IsNotFound(err):
				return 0, fmt.Errorf("reading %s of %s: %w", o.key, m.Name, err)
			}
		}
	}
	return n, nil
}

func orNone(diff string) string {
	if diff == "" {
		return "what the source's held"
	}
	return diff
}

// clusterctlRestore runs `clusterctl move --from-directory DIR` against
// the target.
func (r *backupRun) clusterctlRestore(ctx context.Context, dir string, res *archiveResult) error {
	tgt := r.b.clusters.env.Target
	began := time.Now()
	err := r.ctl.Move(ctx, clusterctl.MoveOptions{
		ToKubeconfig:  clusterctl.Kubeconfig{Path: tgt.KubeconfigPath, Context: tgt.Name},
		FromDirectory: dir,
	})
	res.wall = time.Since(began)
	if err != nil {
		return fmt.Errorf("clusterctl move --from-directory %s: %w", dir, err)
	}
	_, res.bytes, err = directoryFiles(dir)
	return err
}

// operatorRestore creates in the target a MoveOperation whose source is
// the archive, handled by a fresh operator installed there.
func (r *backupRun) operatorRestore(ctx context.Context, f benchFleet, location string, res *archiveResult) error {
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: "restore-" + f.namespace},
		Spec: movev1alpha1.MoveOperationSpec{Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
			Directory:         &movev1alpha1.DirectoryStore{},
			Location:          location,
			IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: restoreKeySecret, Key: identityKey},
		}}},
	}
	done, err := r.operate(ctx, r.target, r.targetID, mo, "operator-restore-"+f.namespace+".log", res)
	if err != nil {
		return err
	}
	if info, err := os.Stat(filepath.Join(r.archives, location)); err == nil {
		res.bytes = info.Size()
	}
	if done.Status.Progress != nil && int(done.Status.Progress.Copied) == 0 {
		return fmt.Errorf("MoveOperation %s is Done having restored nothing", mo.Name)
	}
	return nil
}

// operate starts the operator as installed with identity id (in the
// cluster c reaches) and the archive directory, creates mo there and
// follows it until it ends; then reads the operator's peak RSS, deletes mo
// while the operator runs to remove its finalizer, and stops the operator.
// res gets the time from the create to Done as a watch saw it, the phases
// and the peak RSS.
func (r *backupRun) operate(ctx context.Context, c client.WithWatch, id *installed.Identity, mo *movev1alpha1.MoveOperation, logName string, res *archiveResult) (done *movev1alpha1.MoveOperation, err error) {
	p, err := r.b.startOperator(ctx, id, []string{"--archive-directory=" + r.archives}, logName)
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopErr := p.run.Stop(); stopErr != nil {
			say("  stopping the operator: %v", stopErr)
		}
	}()
	var heap *heapSampler
	if dir := r.b.opts.heapProfileDir; dir != "" {
		heap = startHeapSampler(ctx, p.pprof, filepath.Join(dir, fmt.Sprintf("n%d-r%d-%s-%s.heap", res.n, res.rep, fileTag(res.tool), res.op)), 2*time.Second)
	}
	timeout := r.b.opts.moveTimeoutFor(res.n)
	seen, done, err := follow(ctx, c, p, mo, timeout)
	if heap != nil {
		summary, heapErr := heap.stop()
		res.peakHeap = heap.peak
		if summary != "" {
			say("  %s", summary)
		}
		err = errors.Join(err, heapErr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (operator log: %s)", err, p.run.LogPath)
	}
	if rss, rssErr := peakRSS(p.run.Pid); rssErr == nil {
		res.peakRSS = rss
		// Only informative: a kernel without the field leaves it out.
		res.fileRSS, _ = fileRSS(p.run.Pid)
	} else {
		err = fmt.Errorf("reading the operator's peak RSS: %w", rssErr)
	}
	if done.Status.Phase != movev1alpha1.PhaseDone {
		err = errors.Join(err, fmt.Errorf("MoveOperation %s ended in phase %s: %s: %s (operator log: %s)", mo.Name,
			done.Status.Phase, done.Status.FailureReason, done.Status.FailureMessage, p.run.LogPath))
	} else {
		seen.settle(done.Status.PhaseTransitions)
		res.wall = seen.since(movev1alpha1.PhaseDone)
		res.phases = seen.spans()
	}
	return done, errors.Join(err, deleteMoveOperation(ctx, c, mo))
}

// follow creates mo and watches it until it is Done or Failed, within
// timeout; a watch the API server closes is opened again.
func follow(ctx context.Context, c client.WithWatch, p *operatorProcess, mo *movev1alpha1.MoveOperation, timeout time.Duration) (*phaseClock, *movev1alpha1.MoveOperation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	open := func() (watch.Interface, error) {
		return c.Watch(ctx, &movev1alpha1.MoveOperationList{}, client.InNamespace(mo.Namespace), client.MatchingFields{"metadata.name": mo.Name})
	}
	w, err := open()
	if err != nil {
		return nil, nil, fmt.Errorf("watching MoveOperation %s: %w", mo.Name, err)
	}
	defer func() { w.Stop() }()
	began := time.Now()
	if err := c.Create(ctx, mo); err != nil {
		return nil, nil, fmt.Errorf("creating MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	seen := &phaseClock{began: began}
	for {
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("MoveOperation %s did not end within %s (-move-timeout); last phase seen %s", mo.Name, timeout, seen.last())
		case <-p.run.Exited():
			return nil, nil, fmt.Errorf("the operator exited (%w) in phase %s", p.run.Err(), seen.last())
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				w.Stop()
				if w, err = open(); err != nil {
					return nil, nil, fmt.Errorf("watching MoveOperation %s again: %w", mo.Name, err)
				}
				continue
			}
			got, ok := ev.Object.(*movev1alpha1.MoveOperation)
			if !ok {
				continue
			}
			seen.observe(string(got.Status.Phase), time.Now())
			if ph := got.Status.Phase; ph == movev1alpha1.PhaseDone || ph == movev1alpha1.PhaseFailed {
				return seen, got, nil
			}
		}
	}
}

// deleteMoveOperation deletes an ended MoveOperation while its operator
// still runs to remove the finalizer, and waits until it is gone.
func deleteMoveOperation(ctx context.Context, c client.Client, mo *movev1alpha1.MoveOperation) error {
	if err := c.Delete(ctx, mo); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting MoveOperation %s: %w", mo.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(mo), &movev1alpha1.MoveOperation{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("MoveOperation %s was not gone a minute after its deletion: %w", mo.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// backupPlan says what -backup measures: the sizes, their repetitions and
// the -rss-n backup.
func (o options) backupPlan() string {
	s := o.plan()
	if o.rssN > 0 {
		s += fmt.Sprintf(", then the operator's backup alone at N=%s for its peak RSS", thousands(o.rssN))
	}
	return s
}
