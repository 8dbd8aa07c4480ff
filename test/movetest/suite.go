//go:build cluster

package movetest

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

var (
	// Env is the test package's pair of local management clusters, started
	// by Main.
	Env *testenv.Env
	// Scheme holds the core kinds and MoveOperation.
	Scheme = runtime.NewScheme()
	// TargetKubeconfig is a self-contained kubeconfig for the target cluster.
	TargetKubeconfig []byte
	// SourceKubeconfig points at the source itself (for the "target is the
	// source" test).
	SourceKubeconfig []byte
	// Client reads and writes MoveOperations and core kinds in the source.
	Client client.Client
	// operatorConfig is the operator's own identity in the source, as
	// installed: the ServiceAccount of dist/install.yaml, its RBAC applied,
	// its token the only credential (see test/installed). TargetKubeconfig
	// holds its identity in the target, made as users make it
	// (internal/targetaccess with dist/target-access.yaml).
	operatorConfig *rest.Config
	// OperatorKubeconfig is a kubeconfig file of that identity in the source,
	// for the operator run as a process.
	OperatorKubeconfig string
	// operatorUser is the operator's username in the source, and
	// TargetUser in the target.
	operatorUser, TargetUser string
	// Install is dist/install.yaml, and OperatorIdentity the identity of
	// its ServiceAccount in the source.
	Install          *installed.Install
	OperatorIdentity *installed.Identity
	// ClaimKey is the claim Lease, where the installed manager keeps it:
	// beside its leader election Lease, in its own namespace.
	ClaimKey types.NamespacedName
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(movev1alpha1.AddToScheme(Scheme))
}

// Main is the body of a test package's TestMain: it starts the package's
// pair of local management clusters (Env; opts must install Cluster API),
// runs its tests, and stops the pair. Each test package that calls it has a
// pair of its own, so packages run side by side; within a package, tests
// run one after the other: only one MoveOperation may be active per source
// cluster, and each test leaves none behind.
func Main(m *testing.M, opts testenv.Options) {
	// The operator's logs stay quiet unless MOVE_OPERATOR_TEST_LOGS is set.
	level := zapcore.ErrorLevel
	if os.Getenv("MOVE_OPERATOR_TEST_LOGS") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(level)))
	testenv.Main(m, opts, &Env)
}

var setupOnce struct {
	sync.Once
	err error
}

// EnsureSetup installs the MoveOperation CRD in the source and reads the
// kubeconfigs, once per test binary.
func EnsureSetup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupOnce.err = setup(Env) })
	if setupOnce.err != nil {
		t.Fatalf("setting up the controller tests: %v", setupOnce.err)
	}
}

func setup(e *testenv.Env) error {
	root, err := testenv.RepositoryRoot("go test")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(e.Source.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the MoveOperation CRD: %w", err)
	}
	if Client, err = client.New(e.Source.Config, client.Options{Scheme: Scheme}); err != nil {
		return err
	}
	if Install, err = installed.Read(root); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "move-operator-identity-")
	if err != nil {
		return err
	}
	id, err := Install.Grant(context.Background(), e.Source.Config, dir)
	if err != nil {
		return err
	}
	OperatorIdentity = id
	operatorConfig, OperatorKubeconfig, operatorUser = id.Config, id.Kubeconfig, id.Username
	ClaimKey = types.NamespacedName{Namespace: id.Namespace, Name: claim.DefaultName}
	manifest, err := os.ReadFile(filepath.Join(root, installed.TargetAccessPath))
	if err != nil {
		return err
	}
	if TargetKubeconfig, _, err = targetaccess.Grant(context.Background(), e.Target.Config, manifest, targetaccess.Options{}); err != nil {
		return fmt.Errorf("making the operator's target credential: %w", err)
	}
	if TargetUser, err = WhoAmI(TargetKubeconfig); err != nil {
		return err
	}
	if SourceKubeconfig, err = os.ReadFile(e.Source.KubeconfigPath); err != nil {
		return err
	}
	return nil
}

// Operator is a running manager with the MoveOperation reconciler.
type Operator struct {
	cancel context.CancelFunc
	done   chan struct{}
	// Writes counts the writes the operator made to either cluster.
	Writes atomic.Int64
	// Crashed is set once OperatorOptions.CrashIf said so: no write of
	// this operator reaches a cluster after that, whichever of its workers
	// makes it.
	Crashed atomic.Bool
}

// PendingWrite is a write the operator is about to make.
type PendingWrite struct {
	// N counts the operator's writes to either cluster, from 1.
	N       int64
	Cluster string // "source" or "target"
	Verb    string
	Obj     client.Object
}

// OperatorOptions tune the operator StartOperator runs.
type OperatorOptions struct {
	// CrashIf, when set, is asked before each write whether the operator
	// crashes there: that write and every later one fail, and the manager
	// stops at once, as a process killed there would.
	CrashIf func(w PendingWrite) bool
	// FailIf, when set, is asked before each write whether it fails with
	// an injected error instead of reaching the cluster; it still counts.
	FailIf func(cluster, verb string, obj client.Object) error
	// OnWrite, when set, is called after each successful write of the
	// operator with the cluster ("source" or "target"), the verb and the
	// object as written.
	OnWrite func(cluster, verb string, obj client.Object)
	// OnWriteError, when set, is called after each write of the operator
	// that a cluster refused, with the error.
	OnWriteError func(cluster, verb string, obj client.Object, err error)
	// Move are the options of the move's steps (concurrency).
	Move move.Options
	// PollInterval of the reconciler's waits; short in tests.
	PollInterval time.Duration
	// Archives is where the operator's backups keep archives (its
	// --archive-directory).
	Archives controllers.Archives
}

// StartOperator runs the operator until the test ends (or it crashes).
func StartOperator(t *testing.T, opts OperatorOptions) *Operator {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 200 * time.Millisecond
	}
	EnsureSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	op := &Operator{cancel: cancel, done: make(chan struct{})}
	var crashed sync.Once
	wrap := func(cluster string) func(client.Client) client.Client {
		return func(c client.Client) client.Client {
			return op.intercept(c, cluster, opts, func() { crashed.Do(cancel) })
		}
	}

	mgr, err := ctrl.NewManager(operatorConfig, ctrl.Options{
		Scheme:                 Scheme,
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
	source, err := client.New(operatorConfig, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.MoveOperationReconciler{
		Client:    mgr.GetClient(),
		Source:    wrap("source")(source),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("move-operator"),
		Targets:   &remote.Clients{Reader: mgr.GetAPIReader(), Scheme: Scheme, QPS: 200, Burst: 400, Wrap: wrap("target")},
		Claim:     ClaimKey,
		Move:      opts.Move,
		// Poll often: the tests wait on these loops.
		PollInterval: opts.PollInterval,
		Archives:     opts.Archives,
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		t.Fatalf("setting up the reconciler: %v", err)
	}
	schedules := &controllers.BackupScheduleReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("move-operator"), Self: wrap("source")(source)}
	if err := schedules.SetupWithManager(mgr); err != nil {
		t.Fatalf("setting up the schedules' reconciler: %v", err)
	}
	go func() {
		defer close(op.done)
		if err := mgr.Start(ctx); err != nil {
			t.Logf("manager stopped: %v", err)
		}
	}()
	t.Cleanup(op.Stop)
	return op
}

// intercept wraps a client of one cluster so that every write is counted,
// reported to opts.OnWrite, and refused once opts.CrashIf said crash.
func (op *Operator) intercept(c client.Client, cluster string, opts OperatorOptions, crash func()) client.Client {
	before := func(verb string, obj client.Object) error {
		if asksOnly(obj) {
			return nil // stores nothing: not a write, and no crash point
		}
		n := op.Writes.Add(1)
		if op.Crashed.Load() || (opts.CrashIf != nil && opts.CrashIf(PendingWrite{N: n, Cluster: cluster, Verb: verb, Obj: obj})) {
			op.Crashed.Store(true)
			crash()
			return fmt.Errorf("operator crashed before write %d", n)
		}
		if opts.FailIf != nil {
			return opts.FailIf(cluster, verb, obj)
		}
		return nil
	}
	after := func(verb string, obj client.Object, err error) error {
		if asksOnly(obj) {
			return err
		}
		if err == nil && opts.OnWrite != nil {
			opts.OnWrite(cluster, verb, obj)
		}
		if err != nil && opts.OnWriteError != nil && !op.Crashed.Load() {
			opts.OnWriteError(cluster, verb, obj, err)
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

// Stop stops the operator and waits until it has.
func (op *Operator) Stop() {
	op.cancel()
	<-op.done
}

// newTargetSecret creates, in namespace ns of the source, a Secret holding
// data under key.
func NewSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	EnsureSetup(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := Client.Create(context.Background(), s); err != nil {
		t.Fatalf("creating Secret %s/%s: %v", ns, name, err)
	}
}

// NewMoveOperation creates a MoveOperation in ns of the source.
func NewMoveOperation(t *testing.T, ns, name string, spec movev1alpha1.MoveOperationSpec) *movev1alpha1.MoveOperation {
	t.Helper()
	EnsureSetup(t)
	mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := Client.Create(context.Background(), mo); err != nil {
		t.Fatalf("creating MoveOperation %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() { DeleteMoveOperation(t, mo) })
	return mo
}

// DeleteMoveOperation deletes a MoveOperation and waits until it is gone,
// so that it no longer counts as active for the next test.
func DeleteMoveOperation(t *testing.T, mo *movev1alpha1.MoveOperation) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := Client
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

// Get returns the MoveOperation as it is now.
func Get(g Gomega, mo *movev1alpha1.MoveOperation) *movev1alpha1.MoveOperation {
	got := &movev1alpha1.MoveOperation{}
	g.Expect(Client.Get(context.Background(), client.ObjectKeyFromObject(mo), got)).To(Succeed())
	return got
}

// withWatch lets a plain client go through interceptor.NewClient, which wants
// a client that can watch; the operator never watches through these.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch is not supported by this test client")
}

// WhoAmI asks the cluster a kubeconfig reaches who it authenticates.
func WhoAmI(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return "", err
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), review); err != nil {
		return "", fmt.Errorf("asking who a kubeconfig is: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}
