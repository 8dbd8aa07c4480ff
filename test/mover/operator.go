package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/internal/targetaccess"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/testenv"
)

const (
	// moveNamespace holds the MoveOperations and the target kubeconfig Secret.
	moveNamespace = "default"
	// targetSecret holds the operator's kubeconfig for the target.
	targetSecret = "move-operator-target"
)

// PhaseOrder is every phase of a successful move, in order, as the
// operator's phase table has it.
func PhaseOrder() []string {
	var out []string
	for _, p := range controllers.Path() {
		out = append(out, string(p))
	}
	return out
}

// Operator is the operator as users install it, running against the
// source of an Env: the manager binary taken out of the image, with the
// args and env of dist/install.yaml's Deployment and the ServiceAccount and
// RBAC of that file as its only rights in the source (test/installed), and
// a target credential made as `manager target-access` makes it.
type Operator struct {
	client  client.WithWatch
	run     *installed.Running
	install *installed.Install
	process installed.Process
	workDir string
	// starts counts the manager's starts, which name their logs.
	starts int
}

// StartOperator installs the MoveOperation CRD and the operator's identity
// in the source, its access in the target with a Secret holding that
// credential, and starts the manager. Call it once per Env. root is the
// repository root (testenv.RepositoryRoot); the manager's log and
// credentials are kept in workDir.
func StartOperator(ctx context.Context, env *testenv.Env, root, workDir string) (*Operator, error) {
	return StartOperatorIn(ctx, env.Source, env.Target, root, workDir)
}

// StartOperatorIn is StartOperator with the operator installed in source
// and moving to target, whichever of an Env's clusters they are: after a
// pivot, the operator installed in the self-hosted cluster moves back.
func StartOperatorIn(ctx context.Context, source, target *testenv.Management, root, workDir string) (*Operator, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(movev1alpha1.AddToScheme(scheme))
	if _, err := envtest.InstallCRDs(source.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing the MoveOperation CRD in the source: %w", err)
	}
	admin, err := client.NewWithWatch(source.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client for the source: %w", err)
	}
	install, err := installed.Read(root)
	if err != nil {
		return nil, err
	}
	identity, err := install.Grant(ctx, source.Config, filepath.Join(workDir, "identity"))
	if err != nil {
		return nil, fmt.Errorf("giving the operator its installed identity in the source: %w", err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, installed.TargetAccessPath))
	if err != nil {
		return nil, err
	}
	kubeconfig, _, err := targetaccess.Grant(ctx, target.Config, manifest, targetaccess.Options{})
	if err != nil {
		return nil, fmt.Errorf("making the operator's target credential: %w", err)
	}
	if err := targetaccess.WriteSecret(ctx, admin, moveNamespace, targetSecret, movev1alpha1.DefaultKubeconfigSecretKey, kubeconfig); err != nil {
		return nil, err
	}
	binary, err := installed.ManagerBinary()
	if err != nil {
		return nil, err
	}
	o := &Operator{client: admin, install: install, process: installed.Process{Binary: binary, Identity: identity}, workDir: workDir}
	if err := o.start(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// start starts the manager; the first start logs to operator.log, a
// restart to operator-<n>.log.
func (o *Operator) start(ctx context.Context) error {
	logPath := filepath.Join(o.workDir, "operator.log")
	if o.starts > 0 {
		logPath = filepath.Join(o.workDir, fmt.Sprintf("operator-%d.log", o.starts))
	}
	run, err := o.install.Start(ctx, o.process, logPath)
	if err != nil {
		return err
	}
	o.run = run
	o.starts++
	return nil
}

// Crash kills the manager at once, as a node that dies would, and starts
// it again, as the Deployment's ReplicaSet would.
func (o *Operator) Crash(ctx context.Context) error {
	if err := o.run.Kill(); err != nil {
		return fmt.Errorf("killing the operator: %w", err)
	}
	return o.start(ctx)
}

// Stop stops the operator as the kubelet stops its pod, and waits until it
// has.
func (o *Operator) Stop() error {
	if err := o.run.Stop(); err != nil {
		return err
	}
	return o.run.Err()
}

// ServiceAccount is the namespace and name of the ServiceAccount the
// operator runs as, in the cluster it is installed in.
func (o *Operator) ServiceAccount() (namespace, name string) {
	return o.process.Identity.Namespace, o.process.Identity.ServiceAccount
}

// Namespace is where Move creates its MoveOperations, and where the
// Secrets they name go.
func (o *Operator) Namespace() string { return moveNamespace }

// Target is the spec.target of a move to the target cluster: the Secret,
// in Namespace, that holds the operator's credential there.
func (o *Operator) Target() movev1alpha1.TargetSpec {
	return movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: targetSecret}}
}

// LogPath is the operator's log.
func (o *Operator) LogPath() string { return o.run.LogPath }

// OperatorTimeline returns a timeline of the operator's phases, beginning now.
func OperatorTimeline() *Timeline { return newTimeline(PhaseOrder()) }

// Move creates a MoveOperation for namespaces and follows it until it is
// Done or Failed, marking its phases on tl (a new OperatorTimeline if nil);
// it returns the timeline and the MoveOperation as it ended. The
// MoveOperation stays: Delete removes it.
func (o *Operator) Move(ctx context.Context, tl *Timeline, name string, namespaces []string, options ...SpecOption) (*Timeline, *movev1alpha1.MoveOperation, error) {
	return o.MoveCrashingIn(ctx, tl, name, namespaces, nil, options...)
}

// MoveCrashingIn is Move, with the operator crashed (Crash) as soon as the
// move is seen in each of the given phases, once each.
func (o *Operator) MoveCrashingIn(ctx context.Context, tl *Timeline, name string, namespaces []string, crashIn []movev1alpha1.MovePhase, options ...SpecOption) (*Timeline, *movev1alpha1.MoveOperation, error) {
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: name},
		Spec:       movev1alpha1.MoveOperationSpec{Target: o.Target(), Namespaces: namespaces},
	}
	for _, option := range options {
		option(&mo.Spec)
	}
	w, err := o.watch(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if tl == nil {
		tl = OperatorTimeline()
	}
	if err := o.client.Create(ctx, mo); err != nil {
		w.Stop()
		return nil, nil, fmt.Errorf("creating MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	return o.follow(ctx, tl, w, mo, crashIn)
}

// Follow follows a MoveOperation that someone else created in Namespace
// (a user, with a client of their own) until it is Done or Failed, as
// Move follows the ones it creates, marking its phases on tl (a new
// OperatorTimeline if nil).
func (o *Operator) Follow(ctx context.Context, tl *Timeline, mo *movev1alpha1.MoveOperation) (*Timeline, *movev1alpha1.MoveOperation, error) {
	// A watch opened now begins with the MoveOperation as it is.
	w, err := o.watch(ctx, mo.Name)
	if err != nil {
		return nil, nil, err
	}
	if tl == nil {
		tl = OperatorTimeline()
	}
	return o.follow(ctx, tl, w, mo, nil)
}

// follow reads the MoveOperation's events from w (reopened when the API
// server closes it, stopped when it returns) until it ends, crashing the
// operator in crashIn.
func (o *Operator) follow(ctx context.Context, tl *Timeline, w watch.Interface, mo *movev1alpha1.MoveOperation, crashIn []movev1alpha1.MovePhase) (*Timeline, *movev1alpha1.MoveOperation, error) {
	defer func() { w.Stop() }()
	name := mo.Name
	var err error
	for {
		select {
		case <-ctx.Done():
			return tl, mo, fmt.Errorf("MoveOperation %s did not end (seen: %s; %s): %w", name, tl, lastWord(mo), ctx.Err())
		case <-o.run.Exited():
			return tl, mo, fmt.Errorf("the operator stopped during MoveOperation %s (its log: %s): %w", name, o.run.LogPath, o.run.Err())
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				// The API server closes watches now and then: open it again.
				w.Stop()
				if w, err = o.watch(ctx, name); err != nil {
					return tl, mo, err
				}
				continue
			}
			got, ok := ev.Object.(*movev1alpha1.MoveOperation)
			if !ok {
				continue
			}
			mo = got
			tl.observe(string(mo.Status.Phase), time.Now())
			if p := mo.Status.Phase; p == movev1alpha1.PhaseDone || p == movev1alpha1.PhaseFailed {
				tl.Ended = time.Now()
				return tl, mo, nil
			}
			if i := slices.Index(crashIn, mo.Status.Phase); i >= 0 {
				crashIn = slices.Delete(slices.Clone(crashIn), i, i+1)
				if err := o.Crash(ctx); err != nil {
					return tl, mo, fmt.Errorf("crashing the operator in %s of MoveOperation %s: %w", mo.Status.Phase, name, err)
				}
			}
		}
	}
}

func (o *Operator) watch(ctx context.Context, name string) (watch.Interface, error) {
	w, err := o.client.Watch(ctx, &movev1alpha1.MoveOperationList{}, client.InNamespace(moveNamespace),
		client.MatchingFields{"metadata.name": name})
	if err != nil {
		return nil, fmt.Errorf("watching MoveOperation %s: %w", name, err)
	}
	return w, nil
}

// Delete deletes a finished MoveOperation and waits until the operator has
// let it go, so that the next move starts clean.
func (o *Operator) Delete(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	if err := o.client.Delete(ctx, mo); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting MoveOperation %s: %w", mo.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := o.client.Get(ctx, client.ObjectKeyFromObject(mo), &movev1alpha1.MoveOperation{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("MoveOperation %s still exists a minute after its deletion", mo.Name), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastWord is what a MoveOperation's status last said of its progress: its
// phase and its Ready condition's message (what it waits for, or the error
// it retries after), which is what a move that does not end must show.
func lastWord(mo *movev1alpha1.MoveOperation) string {
	ready := meta.FindStatusCondition(mo.Status.Conditions, movev1alpha1.ReadyCondition)
	if ready == nil {
		return fmt.Sprintf("last phase %q, no Ready condition", mo.Status.Phase)
	}
	return fmt.Sprintf("last phase %q, Ready=%s: %s", mo.Status.Phase, ready.Status, ready.Message)
}

// SpecOption sets a field of the MoveOperation a Move creates.
type SpecOption func(*movev1alpha1.MoveOperationSpec)

// CarryStatus makes the move carry the status of what it moves
// (spec.objectStatusPolicy Carry).
func CarryStatus(spec *movev1alpha1.MoveOperationSpec) {
	spec.ObjectStatusPolicy = movev1alpha1.ObjectStatusCarry
}
