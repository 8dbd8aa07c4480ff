package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/registry"
	"github.com/move-operator/move-operator/test/takeover"
	"github.com/move-operator/move-operator/test/testenv"
)

// The disaster drill, scenario i: the fleet's management cluster is lost
// and the fleet comes back from a backup into the target. Neither the
// lab's source nor its operator takes part: the fleet runs in a management
// cluster of its own (testenv.Env.StartManagement, the same controllers on
// the same clouds), which each mover backs up its own way before that
// cluster is lost (Management.Lose: its controllers stop, its processes
// end, its data is removed), and restores into the lab's target.
//
//   - clusterctl: `clusterctl move --to-directory DIR --namespace NS`
//     against the doomed cluster, then `clusterctl move --from-directory
//     DIR` against the target.
//   - operator: a MoveOperation in the doomed cluster whose target is an
//     encrypted archive in a registry (CNCF Distribution, run as a
//     process), handled by the operator installed there; then, in the
//     target, a MoveOperation whose source is that archive by digest,
//     handled by the operator installed in the target with a target's
//     rights there, as docs/disaster-recovery.md says.

// drillBound bounds a backup or a restore.
const drillBound = 6 * time.Minute

// drillScenario is scenario i.
func drillScenario() scenario {
	return scenario{
		id: "i", title: "management cluster lost",
		setup: "The disaster drill: the fleet (the shape of every other scenario's, with a BareMetalHost for the worker, provisioned) runs in a management cluster of its own, with the same controllers on the same clouds. Each mover backs it up its own way: clusterctl with `clusterctl move --to-directory` (one directory per namespace), the operator with a MoveOperation whose target is an archive, encrypted to an age key and pushed to a registry (CNCF Distribution " + registry.Version + ", run as a process), by the operator installed in that cluster. The cluster is then lost: its controllers stop, its processes end, its data is removed. The fleet is restored into the target: clusterctl with `clusterctl move --from-directory`, the operator with a MoveOperation in the target whose source is the archive by its digest, handled by the operator installed there (bound to `move-operator-target`, as docs/disaster-recovery.md says). The move column is the backup's time plus the restore's; copies differing and late writes are not measured (the fleet is copied from a backup, not from a cluster that runs on; nothing runs while a backup is restored but the target's controllers, which both movers' restores meet alike).",
		arm:   func(context.Context, *lab, *fleet.Fleet, *eventLog) (*armed, error) { return &armed{}, nil },
		hosts: true,
		drill: true,
	}
}

// drillKit is what the drill's operator runs need once per lab: a
// registry with one account, and an age key.
type drillKit struct {
	reg          *registry.Registry
	dockerConfig []byte
	key          *age.X25519Identity
}

func (l *lab) drillKit(ctx context.Context) (*drillKit, error) {
	if l.kit != nil {
		return l.kit, nil
	}
	dir := filepath.Join(l.workDir, "registry")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	reg, err := registry.Start(ctx, dir, registry.Options{User: "backup", Password: "drill"})
	if err != nil {
		return nil, fmt.Errorf("starting the registry: %w", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("backup:drill"))
	config, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	if err != nil {
		reg.Stop()
		return nil, err
	}
	key, err := age.GenerateX25519Identity()
	if err != nil {
		reg.Stop()
		return nil, err
	}
	l.kit = &drillKit{reg: reg, dockerConfig: config, key: key}
	return l.kit, nil
}

// stop stops the registry.
func (k *drillKit) stop() {
	if k != nil {
		k.reg.Stop()
	}
}

// runDrill runs scenario i with one mover.
func (l *lab) runDrill(ctx context.Context, s scenario, m string) result {
	r := result{scenario: s.id, mover: m, drill: true}
	prefix := "s" + s.id + moverCode(m) + "-" + rand.String(4)
	log := &eventLog{}
	lost, err := l.env.StartManagement(ctx, prefix)
	if err != nil {
		r.moveErr = fmt.Errorf("starting the management cluster to lose: %w", err)
		return r
	}
	gone := false
	defer func() {
		if !gone {
			_ = lost.Lose()
		}
	}()
	opts := fleetOptions(prefix, l, s.hosts)
	opts.Live.ManagementCluster = lost.Name
	f, err := fleet.Create(ctx, lost.Client, opts)
	if err != nil {
		r.moveErr = fmt.Errorf("creating the fleet: %w", err)
		return r
	}
	defer l.removeFleet(f)
	keep := takeover.InFleet(f)
	if err := waitSettledIn(ctx, lost, f, keep); err != nil {
		r.moveErr = err
		return r
	}
	nodesBefore, err := l.workloadNodes(ctx, lost, f)
	if err == nil && len(nodesBefore) == 0 {
		err = fmt.Errorf("no Machine of the fleet in %s has a Node: nothing to compare after the restore", lost.Name)
	}
	if err != nil {
		r.moveErr = err
		return r
	}
	mark := takeover.MarkNow(l.env)
	began := time.Now()
	log.add("%s: the backup starts", m)
	var restore func(context.Context) error
	if m == moverClusterctl {
		restore, err = l.clusterctlBackup(ctx, lost, f, prefix)
	} else {
		restore, err = l.operatorBackup(ctx, lost, f, prefix)
	}
	backedUp := time.Now()
	log.add("%s: the backup ended", m)
	if err != nil {
		r.moveErr = fmt.Errorf("the backup: %w", err)
		r.sequence = l.sequence(log, &mover.Timeline{Began: began}, mark, keep)
		return r
	}
	if err := lost.Lose(); err != nil {
		r.moveErr = fmt.Errorf("losing the management cluster: %w", err)
		return r
	}
	gone = true
	log.add("management cluster %s is lost: its controllers stopped, its processes ended, its data removed", lost.Name)
	restoreBegan := time.Now()
	err = restore(ctx)
	restored := time.Now()
	log.add("%s: the restore ended", m)
	r.duration = backedUp.Sub(began) + restored.Sub(restoreBegan)
	if err != nil {
		r.moveErr = fmt.Errorf("the restore: %w", err)
		r.sequence = l.sequence(log, &mover.Timeline{Began: began}, mark, keep)
		return r
	}
	r.settled, r.settleNote = l.settleInTarget(ctx, f)
	log.add("settle: %t %s", r.settled, r.settleNote)
	r.sequence = l.sequence(log, &mover.Timeline{Began: began}, mark, keep)
	l.count(&r, mark, keep, time.Time{}, restored, &armed{})
	for _, w := range takeover.Writes(l.env.Target, mark.TargetWrites(), keep) {
		if madeAgain(w) {
			r.madeAgain = append(r.madeAgain, w.String())
			r.sequence = append(r.sequence, "made again: "+w.String())
		}
	}
	after, err := l.workloadNodes(ctx, l.env.Target, f)
	if err != nil {
		r.sequence = append(r.sequence, "reading the workload Nodes after the restore: "+err.Error())
	}
	for key, uid := range nodesBefore {
		if after[key] != uid {
			r.nodesReplaced++
			r.sequence = append(r.sequence, fmt.Sprintf("Node of %s replaced: UID %s before the backup, %q after the restore", key, uid, after[key]))
		}
	}
	sort.Strings(r.sequence)
	return r
}

// waitSettledIn is waitSettledInSource for another management cluster.
func waitSettledIn(ctx context.Context, m *testenv.Management, f *fleet.Fleet, keep func(string, string) bool) error {
	return takeover.Poll(ctx, settleBefore, func() error {
		if err := takeover.Available(ctx, m, f); err != nil {
			return err
		}
		if err := takeover.Running(ctx, m, f); err != nil {
			return err
		}
		if err := hostsProvisioned(ctx, m, f); err != nil {
			return err
		}
		return takeover.Quiet(m, keep, quietBefore)
	})
}

// clusterctlBackup writes each namespace of the fleet to a directory of
// its own with clusterctl, and returns the restore of those directories
// into the target.
func (l *lab) clusterctlBackup(ctx context.Context, lost *testenv.Management, f *fleet.Fleet, prefix string) (func(context.Context) error, error) {
	ctx, cancel := context.WithTimeout(ctx, drillBound)
	defer cancel()
	var dirs []string
	for _, ns := range f.Namespaces {
		dir := filepath.Join(l.workDir, prefix, ns)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := l.cc.Client().Move(ctx, clusterctl.MoveOptions{
			FromKubeconfig: clusterctl.Kubeconfig{Path: lost.KubeconfigPath, Context: lost.Name},
			Namespace:      ns,
			ToDirectory:    dir,
		}); err != nil {
			return nil, fmt.Errorf("clusterctl move --to-directory %s --namespace %s: %w", dir, ns, err)
		}
		dirs = append(dirs, dir)
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, drillBound)
		defer cancel()
		tgt := l.env.Target
		for _, dir := range dirs {
			if err := l.cc.Client().Move(ctx, clusterctl.MoveOptions{
				ToKubeconfig:  clusterctl.Kubeconfig{Path: tgt.KubeconfigPath, Context: tgt.Name},
				FromDirectory: dir,
			}); err != nil {
				return fmt.Errorf("clusterctl move --from-directory %s: %w", dir, err)
			}
		}
		return nil
	}, nil
}

// operatorBackup backs the fleet up with the operator installed in the
// cluster to lose, encrypted, to the lab's registry, and returns the
// restore of that archive, by its digest, by the operator installed in
// the target.
func (l *lab) operatorBackup(ctx context.Context, lost *testenv.Management, f *fleet.Fleet, prefix string) (func(context.Context) error, error) {
	kit, err := l.drillKit(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, drillBound)
	defer cancel()
	op, err := mover.StartOperatorIn(ctx, lost, l.env.Target, l.root, l.subdir(prefix+"-backup"))
	if err != nil {
		return nil, fmt.Errorf("installing the operator in the cluster to lose: %w", err)
	}
	defer func() { _ = op.Stop() }()
	if err := kit.secrets(ctx, lost, op.Namespace()); err != nil {
		return nil, err
	}
	store := kit.store(prefix)
	_, backup, err := op.Move(ctx, nil, "backup", f.Namespaces, func(spec *movev1alpha1.MoveOperationSpec) {
		spec.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{OCI: store, RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "backup-keys", Key: "recipients"}}}
	})
	if err != nil {
		return nil, err
	}
	if backup.Status.Phase != movev1alpha1.PhaseDone || backup.Status.Archive == nil {
		return nil, fmt.Errorf("backup %s ended in phase %s: %s: %s", backup.Name, backup.Status.Phase, backup.Status.FailureReason, backup.Status.FailureMessage)
	}
	location := backup.Status.Archive.Location
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, drillBound)
		defer cancel()
		restorer, err := mover.StartOperatorIn(ctx, l.env.Target, l.env.Source, l.root, l.subdir(prefix+"-restore"))
		if err != nil {
			return fmt.Errorf("installing the operator in the target: %w", err)
		}
		defer func() { _ = restorer.Stop() }()
		ns, sa := restorer.ServiceAccount()
		unbind, err := installed.AllowRestores(ctx, l.env.Target.Config, l.root, ns, sa)
		if err != nil {
			return err
		}
		defer unbind()
		if err := kit.secrets(ctx, l.env.Target, restorer.Namespace()); err != nil {
			return err
		}
		_, restored, err := restorer.Move(ctx, nil, "restore-"+prefix, f.Namespaces, func(spec *movev1alpha1.MoveOperationSpec) {
			spec.Target = movev1alpha1.TargetSpec{}
			spec.Source = &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{OCI: store, Location: location,
				IdentitySecretRef: &movev1alpha1.SecretKeyReference{Name: "restore-key", Key: "identity"}}}
		})
		if err != nil {
			return err
		}
		defer func() { _ = restorer.Delete(context.WithoutCancel(ctx), restored) }()
		if restored.Status.Phase != movev1alpha1.PhaseDone {
			return fmt.Errorf("restore %s ended in phase %s: %s: %s", restored.Name, restored.Status.Phase, restored.Status.FailureReason, restored.Status.FailureMessage)
		}
		return nil
	}, nil
}

// store is the registry repository of one run's archive.
func (k *drillKit) store(prefix string) *movev1alpha1.OCIStore {
	return &movev1alpha1.OCIStore{Repository: k.reg.Host + "/drill/" + prefix, CredentialsSecretRef: &movev1alpha1.LocalSecretReference{Name: "registry"}}
}

// secrets puts the key pair and the registry's credentials in a cluster's
// operator namespace, as a user does before a backup or a restore (the
// Secrets stay when they are there).
func (k *drillKit) secrets(ctx context.Context, m *testenv.Management, namespace string) error {
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "backup-keys"}, Data: map[string][]byte{"recipients": []byte(k.key.Recipient().String())}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "restore-key"}, Data: map[string][]byte{"identity": []byte(k.key.String())}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "registry"}, Data: map[string][]byte{corev1.DockerConfigJsonKey: k.dockerConfig}, Type: corev1.SecretTypeDockerConfigJson},
	} {
		if err := m.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Secret %s/%s in %s: %w", s.Namespace, s.Name, m.Name, err)
		}
	}
	return nil
}

// subdir is a directory of the lab's work directory, made.
func (l *lab) subdir(name string) string {
	dir := filepath.Join(l.workDir, name)
	_ = os.MkdirAll(dir, 0o700)
	return dir
}

// madeAgain reports whether a controller's write created or deleted one of
// a machine's objects (its infrastructure machine, its KubeadmConfig, its
// bootstrap data Secret): a restore that keeps every machine makes none.
func madeAgain(w capiprovider.Write) bool {
	if !w.Succeeded() || (!takeover.Created(w) && w.Verb != "delete" && w.Verb != "deletecollection") {
		return false
	}
	switch w.Kind {
	case loopprovider.MachineKind, capiprovider.DevMachineKind, "KubeadmConfig", "Secret":
		return true
	}
	return false
}

// workloadNodes are the UIDs of the Nodes of the fleet's Machines in the
// workload API server, by namespace/Machine/Node: a Node made again has
// another UID.
func (l *lab) workloadNodes(ctx context.Context, m *testenv.Management, f *fleet.Fleet) (map[string]types.UID, error) {
	out := map[string]types.UID{}
	for _, ns := range f.Namespaces {
		machines := &clusterv1.MachineList{}
		if err := m.Client.List(ctx, machines, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing the Machines of %s in %s: %w", ns, m.Name, err)
		}
		for _, machine := range machines.Items {
			name := machine.Status.NodeRef.Name
			if name == "" {
				continue
			}
			node := &corev1.Node{}
			if err := l.env.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
				return nil, fmt.Errorf("reading Node %s of Machine %s/%s: %w", name, ns, machine.Name, err)
			}
			out[ns+"/"+machine.Name+"/"+name] = node.UID
		}
	}
	return out, nil
}
