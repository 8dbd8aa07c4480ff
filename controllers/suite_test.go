//go:build cluster

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/controllers"
	"github.com/move-operator/move-operator/internal/claim"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/remote"
	"github.com/move-operator/move-operator/internal/targetaccess"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/testenv"
)

// The controller tests share one pair of local management clusters with
// Cluster API installed, and run the reconciler in a real manager against
// them. Tests run one after the other: only one MoveOperation may be active
// per source cluster, and each test leaves none behind.

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
	// targetKubeconfig is a self-contained kubeconfig for the target cluster.
	targetKubeconfig []byte
	// sourceKubeconfig points at the source itself (for the "target is the
	// source" test).
	sourceKubeconfig []byte
	// k8s reads and writes MoveOperations and core kinds in the source.
	k8s client.Client
	// operatorConfig is the operator's own identity in the source, as
	// installed: the ServiceAccount of dist/install.yaml, its RBAC applied,
	// its token the only credential (see test/installed). targetKubeconfig
	// holds its identity in the target, made as users make it
	// (internal/targetaccess with dist/target-access.yaml).
	operatorConfig *rest.Config
	// operatorKubeconfig is a kubeconfig file of that identity in the source,
	// for the operator run as a process.
	operatorKubeconfig string
	// operatorUser is the operator's username in the source, and
	// targetUser in the target.
	operatorUser, targetUser string
	// install is dist/install.yaml, and operatorIdentity the identity of
	// its ServiceAccount in the source.
	install          *installed.Install
	operatorIdentity *installed.Identity
	// claimKey is the claim Lease, where the installed manager keeps it:
	// beside its leader election Lease, in its own namespace.
	claimKey types.NamespacedName
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(movev1alpha1.AddToScheme(scheme))
}

func TestMain(m *testing.M) {
	// The operator's logs stay quiet unless MOVE_OPERATOR_TEST_LOGS is set.
	level := zapcore.ErrorLevel
	if os.Getenv("MOVE_OPERATOR_TEST_LOGS") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(level)))
	testenv.Main(m, testenv.Options{CAPI: true}, &env)
}

var setupOnce struct {
	sync.Once
	err error
}

// ensureSetup installs the MoveOperation CRD in the source and reads the
// kubeconfigs, once per test binary.
func ensureSetup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupOnce.err = setup(env) })
	if setupOnce.err != nil {
		t.Fatalf("setting up the controller tests: %v", setupOnce.err)
	}
}

func setup(e *testenv.Env) error {
	if _, err := envtest.InstallCRDs(e.Source.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the MoveOperation CRD: %w", err)
	}
	var err error
	if k8s, err = client.New(e.Source.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	root, err := testenv.RepositoryRoot("go test ./controllers/")
	if err != nil {
		return err
	}
	if install, err = installed.Read(root); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "move-operator-identity-")
	if err != nil {
		return err
	}
	id, err := install.Grant(context.Background(), e.Source.Config, dir)
	if err != nil {
		return err
	}
	operatorIdentity = id
	operatorConfig, operatorKubeconfig, operatorUser = id.Config, id.Kubeconfig, id.Username
	claimKey = types.NamespacedName{Namespace: id.Namespace, Name: claim.DefaultName}
	manifest, err := os.ReadFile(filepath.Join(root, installed.TargetAccessPath))
	if err != nil {
		return err
	}
	if targetKubeconfig, _, err = targetaccess.Grant(context.Background(), e.Target.Config, manifest, targetaccess.Options{}); err != nil {
		return fmt.Errorf("making the operator's target credential: %w", err)
	}
	if targetUser, err = whoAmI(targetKubeconfig); err != nil {
		return err
	}
	if sourceKubeconfig, err = os.ReadFile(e.Source.KubeconfigPath); err != nil {
		return err
	}
	return nil
}

// operator is a running manager with the MoveOperation reconciler.
type operator struct {
	cancel context.CancelFunc
	done   chan struct{}
	// writes counts the writes the operator made to either cluster.
	writes atomic.Int64
	// crashed is set once operatorOptions.crashIf said so: no write of
	// this operator reaches a cluster after that, whichever of its workers
	// makes it.
	crashed atomic.Bool
}

// pendingWrite is a write the operator is about to make.
type pendingWrite struct {
	// n counts the operator's writes to either cluster, from 1.
	n       int64
	cluster string // "source" or "target"
	verb    string
	obj     client.Object
}

type operatorOptions struct {
	// crashIf, when set, is asked before each write whether the operator
	// crashes there: that write and every later one fail, and the manager
	// stops at once, as a process killed there would.
	crashIf func(w pendingWrite) bool
	// failIf, when set, is asked before each write whether it fails with
	// an injected error instead of reaching the cluster; it still counts.
	failIf func(cluster, verb string, obj client.Object) error
	// onWrite, when set, is called after each successful write of the
	// operator with the cluster ("source" or "target"), the verb and the
	// object as written.
	onWrite func(cluster, verb string, obj client.Object)
	// onWriteError, when set, is called after each write of the operator
	// that a cluster refused, with the error.
	onWriteError func(cluster, verb string, obj client.Object, err error)
	// move are the options of the move's steps (concurrency).
	move move.Options
	// pollInterval of the reconciler's waits; short in tests.
	pollInterval time.Duration
}

// startOperator runs the operator until the test ends (or it crashes).
func startOperator(t *testing.T, opts operatorOptions) *operator {
	t.Helper()
	if opts.pollInterval == 0 {
		opts.pollInterval = 200 * time.Millisecond
	}
	ensureSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan struct{})}
	var crashed sync.Once
	wrap := func(cluster string) func(client.Client) client.Client {
		return func(c client.Client) client.Client {
			return op.intercept(c, cluster, opts, func() { crashed.Do(cancel) })
		}
	}

	mgr, err := ctrl.NewManager(operatorConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return wrap("source")(c), nil
		},
	})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	source, err := client.New(operatorConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.MoveOperationReconciler{
		Client:    mgr.GetClient(),
		Source:    wrap("source")(source),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("move-operator"),
		Targets:   &remote.Clients{Reader: mgr.GetAPIReader(), Scheme: scheme, QPS: 200, Burst: 400, Wrap: wrap("target")},
		Claim:     claimKey,
		Move:      opts.move,
		// Poll often: the tests wait on these loops.
		PollInterval: opts.pollInterval,
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		t.Fatalf("setting up the reconciler: %v", err)
	}
	go func() {
		defer close(op.done)
		if err := mgr.Start(ctx); err != nil {
			t.Logf("manager stopped: %v", err)
		}
	}()
	t.Cleanup(op.stop)
	return op
}

// intercept wraps a client of one cluster so that every write is counted,
// reported to opts.onWrite, and refused once opts.crashIf said crash.
func (op *operator) intercept(c client.Client, cluster string, opts operatorOptions, crash func()) client.Client {
	before := func(verb string, obj client.Object) error {
		if asksOnly(obj) {
			return nil // stores nothing: not a write, and no crash point
		}
		n := op.writes.Add(1)
		if op.crashed.Load() || (opts.crashIf != nil && opts.crashIf(pendingWrite{n: n, cluster: cluster, verb: verb, obj: obj})) {
			op.crashed.Store(true)
			crash()
			return fmt.Errorf("operator crashed before write %d", n)
		}
		if opts.failIf != nil {
			return opts.failIf(cluster, verb, obj)
		}
		return nil
	}
	after := func(verb string, obj client.Object, err error) error {
		if asksOnly(obj) {
			return err
		}
		if err == nil && opts.onWrite != nil {
			opts.onWrite(cluster, verb, obj)
		}
		if err != nil && opts.onWriteError != nil && !op.crashed.Load() {
			opts.onWriteError(cluster, verb, obj, err)
		}
		return err
	}
	return interceptor.NewClient(withWatch{c}, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
			if err := before("create", obj); err != nil {
				return err
			}
			return after("create", obj, c.Create(ctx, obj, o...))
		},
		// A dry run (the rehearsal of the deletion, the check of the
		// copies with the target's webhooks) stores nothing: not a write,
		// and no crash point.
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
			if len((&client.UpdateOptions{}).ApplyOptions(o).DryRun) > 0 {
				return c.Update(ctx, obj, o...)
			}
			if err := before("update", obj); err != nil {
				return err
			}
			return after("update", obj, c.Update(ctx, obj, o...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
			if len((&client.PatchOptions{}).ApplyOptions(o).DryRun) > 0 {
				return c.Patch(ctx, obj, p, o...)
			}
			if err := before("patch", obj); err != nil {
				return err
			}
			return after("patch", obj, c.Patch(ctx, obj, p, o...))
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.DeleteOption) error {
			if len((&client.DeleteOptions{}).ApplyOptions(o).DryRun) > 0 {
				return c.Delete(ctx, obj, o...)
			}
			if err := before("delete", obj); err != nil {
				return err
			}
			return after("delete", obj, c.Delete(ctx, obj, o...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			if err := before("patch/"+sub, obj); err != nil {
				return err
			}
			return after("patch/"+sub, obj, c.SubResource(sub).Patch(ctx, obj, p, o...))
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, o ...client.SubResourceUpdateOption) error {
			if err := before("update/"+sub, obj); err != nil {
				return err
			}
			return after("update/"+sub, obj, c.SubResource(sub).Update(ctx, obj, o...))
		},
	})
}

// asksOnly reports whether a create only asks the API server something
// (who the operator is, whether it may do a thing) and stores nothing.
func asksOnly(obj client.Object) bool {
	switch obj.(type) {
	case *authenticationv1.SelfSubjectReview, *authorizationv1.SelfSubjectAccessReview, *authorizationv1.SubjectAccessReview:
		return true
	}
	return false
}

// stop stops the operator and waits until it has.
func (op *operator) stop() {
	op.cancel()
	<-op.done
}

// newTargetSecret creates, in namespace ns of the source, a Secret holding
// data under key.
func newSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	ensureSetup(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Secret %s/%s: %v", ns, name, err)
	}
}

// newMoveOperation creates a MoveOperation in ns of the source.
func newMoveOperation(t *testing.T, ns, name string, spec movev1alpha1.MoveOperationSpec) *movev1alpha1.MoveOperation {
	t.Helper()
	ensureSetup(t)
	mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8s.Create(context.Background(), mo); err != nil {
		t.Fatalf("creating MoveOperation %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() { deleteMoveOperation(t, mo) })
	return mo
}

// deleteMoveOperation deletes a MoveOperation and waits until it is gone,
// so that it no longer counts as active for the next test.
func deleteMoveOperation(t *testing.T, mo *movev1alpha1.MoveOperation) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := k8s
	_ = c.Delete(ctx, mo)
	err := waitFor(ctx, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(mo), &movev1alpha1.MoveOperation{}) != nil
	})
	if err != nil {
		// No operator runs any more: take the finalizer off by hand.
		t.Logf("MoveOperation %s/%s was not removed by the operator; removing its finalizer", mo.Namespace, mo.Name)
		got := &movev1alpha1.MoveOperation{}
		if c.Get(ctx, client.ObjectKeyFromObject(mo), got) == nil {
			got.Finalizers = nil
			_ = c.Update(ctx, got)
		}
	}
}

func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// get returns the MoveOperation as it is now.
func get(g Gomega, mo *movev1alpha1.MoveOperation) *movev1alpha1.MoveOperation {
	got := &movev1alpha1.MoveOperation{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(mo), got)).To(Succeed())
	return got
}

// withWatch lets a plain client go through interceptor.NewClient, which wants
// a client that can watch; the operator never watches through these.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch is not supported by this test client")
}

// unstructuredObj adapts a map to what kstatus reads.
type unstructuredObj = unstructured.Unstructured

// whoAmI asks the cluster a kubeconfig reaches who it authenticates.
func whoAmI(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "", err
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), review); err != nil {
		return "", fmt.Errorf("asking who a kubeconfig is: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
