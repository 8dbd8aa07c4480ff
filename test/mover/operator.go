package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/remote"
	"github.com/move-operator/move-operator/test/testenv"
)

const (
	// OperatorUser is the operator's username in both clusters: its webhook
	// bypass is scoped to it, so it must not be the admin the tests use.
	OperatorUser = "move-operator"
	// moveNamespace holds the MoveOperations and the target kubeconfig Secret.
	moveNamespace = "default"
	// targetSecret holds the operator's kubeconfig for the target.
	targetSecret = "move-operator-target"
)

// PhaseOrder is every phase of a successful move, in order.
var PhaseOrder = []string{
	string(movev1alpha1.PhasePending), string(movev1alpha1.PhaseValidating), string(movev1alpha1.PhaseRecording),
	string(movev1alpha1.PhaseScalingDown), string(movev1alpha1.PhaseCopying), string(movev1alpha1.PhaseDeleting),
	string(movev1alpha1.PhaseRestoringTarget), string(movev1alpha1.PhaseRestoringSource), string(movev1alpha1.PhaseDone),
}

// Operator is the MoveOperation reconciler running in-process against the
// source of an Env, as the operator's Deployment would in the source.
type Operator struct {
	client client.WithWatch
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// StartOperator installs the MoveOperation CRD in the source, gives the
// operator its own user in both clusters and a Secret with its target
// kubeconfig, and starts it. Call it once per Env: the users are created
// once. root is the repository root (testenv.RepositoryRoot).
func StartOperator(ctx context.Context, env *testenv.Env, root string) (*Operator, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(movev1alpha1.AddToScheme(scheme))
	if _, err := envtest.InstallCRDs(env.Source.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing the MoveOperation CRD in the source: %w", err)
	}
	admin, err := client.NewWithWatch(env.Source.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client for the source: %w", err)
	}
	operatorConfig, _, err := env.Source.AddUser(OperatorUser)
	if err != nil {
		return nil, fmt.Errorf("adding the operator's user to the source: %w", err)
	}
	_, targetPath, err := env.Target.AddUser(OperatorUser)
	if err != nil {
		return nil, fmt.Errorf("adding the operator's user to the target: %w", err)
	}
	kubeconfig, err := os.ReadFile(targetPath)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: targetSecret},
		Data:       map[string][]byte{movev1alpha1.DefaultKubeconfigSecretKey: kubeconfig},
	}
	if err := admin.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("creating the target kubeconfig Secret %s/%s: %w", moveNamespace, targetSecret, err)
	}

	mgr, err := ctrl.NewManager(operatorConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The providers' managers run in this process too.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the operator's manager: %w", err)
	}
	source, err := client.New(operatorConfig, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the operator's source client: %w", err)
	}
	r := &controllers.MoveOperationReconciler{
		Client:    mgr.GetClient(),
		Source:    source,
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("move-operator"),
		Targets:   &remote.Clients{Reader: mgr.GetAPIReader(), Scheme: scheme, QPS: 200, Burst: 400},
		Move:      move.Options{},
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, fmt.Errorf("setting up the MoveOperation reconciler: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	o := &Operator{client: admin, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.err = mgr.Start(runCtx)
	}()
	return o, nil
}

// Stop stops the operator and waits until it has.
func (o *Operator) Stop() error {
	o.cancel()
	<-o.done
	return o.err
}

// OperatorTimeline returns a timeline of the operator's phases, beginning now.
func OperatorTimeline() *Timeline { return newTimeline(PhaseOrder) }

// Move creates a MoveOperation for namespaces and follows it until it is
// Done or Failed, marking its phases on tl (a new OperatorTimeline if nil);
// it returns the timeline and the MoveOperation as it ended. The
// MoveOperation stays: Delete removes it.
func (o *Operator) Move(ctx context.Context, tl *Timeline, name string, namespaces []string) (*Timeline, *movev1alpha1.MoveOperation, error) {
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: name},
		Spec: movev1alpha1.MoveOperationSpec{
			Target:     movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: targetSecret}},
			Namespaces: namespaces,
		},
	}
	w, err := o.watch(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	defer func() { w.Stop() }()
	if tl == nil {
		tl = OperatorTimeline()
	}
	if err := o.client.Create(ctx, mo); err != nil {
		return nil, nil, fmt.Errorf("creating MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	for {
		select {
		case <-ctx.Done():
			return tl, mo, fmt.Errorf("MoveOperation %s did not end (seen: %s; %s): %w", name, tl, lastWord(mo), ctx.Err())
		case <-o.done:
			return tl, mo, fmt.Errorf("the operator stopped during MoveOperation %s: %w", name, o.err)
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
