package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/targetaccess"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/testenv"
)

const (
	// moveNamespace holds the MoveOperations and the target kubeconfig Secret.
	moveNamespace = "default"
	// targetSecret is the Secret with the target's kubeconfig.
	targetSecret = "target-kubeconfig"
	// idleWindow is how long the background request rate is measured.
	idleWindow = 10 * time.Second
)

// clusters is the pair of local management clusters of one fleet size,
// ready for the movers.
type clusters struct {
	env *testenv.Env
	// identity is the operator's in the source, as installed: its only
	// credential there.
	identity *installed.Identity
	// source is a client of the source that also knows MoveOperations.
	source client.WithWatch
	// types are the kinds a move takes, at their storage versions, as both
	// tools discover them: the CRDs labelled clusterctl.cluster.x-k8s.io,
	// plus Secret and ConfigMap.
	types []schema.GroupVersionKind
	// namespaced are the namespaced ones among types: what the bench
	// counts and the baseline moves. The cluster-scoped ones (the fleets'
	// LoopClusterIdentities) are copied by both tools and never deleted,
	// the same for both, so the bench leaves them out.
	namespaced []schema.GroupVersionKind
	// statusSubresource are the kinds among types whose status is written
	// through its own subresource, as graph.Type.StatusSubresource says:
	// those whose status the parity floor writes with -carry.
	statusSubresource map[schema.GroupKind]bool
	// components are the processes whose CPU time each move accounts for.
	components []component
	// classes reconciles the target's ClusterClasses as the core
	// provider would.
	classes *classReconciler
	// idle is the background request rate of each API server (requests
	// per second), measured with nothing moving.
	idle map[string]float64
}

// startClusters starts the pair, installs the MoveOperation CRD, the
// operator's identity and the target kubeconfig Secret in the source, reads
// every kind once in both clusters and measures the idle request rate.
func startClusters(ctx context.Context, b *bench) (*clusters, error) {
	env, err := testenv.Start(ctx, testenv.Options{CAPI: true, Controllers: b.opts.capd, InMemory: b.opts.capd, PodStartLatency: b.opts.podStartLatency, Logf: func(format string, args ...any) {
		say("  "+format, args...)
	}})
	if err != nil {
		return nil, fmt.Errorf("starting the management clusters: %w", err)
	}
	c := &clusters{env: env}
	if b.opts.conversionWhileStopped {
		for _, m := range []*testenv.Management{env.Source, env.Target} {
			if err := m.CAPI.SetConversionWhileStopped(true); err != nil {
				return nil, errors.Join(fmt.Errorf("serving conversion while the providers of %s are stopped: %w", m.Name, err), c.stop(true))
			}
		}
	}
	if err := c.prepare(ctx, b); err != nil {
		return nil, errors.Join(err, c.stop(true))
	}
	return c, nil
}

func (c *clusters) prepare(ctx context.Context, b *bench) error {
	scheme := capiprovider.NewScheme()
	utilruntime.Must(movev1alpha1.AddToScheme(scheme))
	var err error
	if c.source, err = client.NewWithWatch(c.env.Source.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("creating a client for the source: %w", err)
	}
	if _, err := envtest.InstallCRDs(c.env.Source.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(b.root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the MoveOperation CRD in the source: %w", err)
	}
	if err := c.grantOperator(ctx, b); err != nil {
		return err
	}
	if c.types, c.namespaced, c.statusSubresource, err = moveTypes(ctx, c.env.Source.Client); err != nil {
		return err
	}
	// A fresh API server answers the first LIST of a kind with 429 until its
	// watch cache is ready; nobody should pay that second inside a timing.
	for _, m := range []*testenv.Management{c.env.Source, c.env.Target} {
		for _, gvk := range c.types {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := m.Client.List(ctx, list, client.Limit(1)); err != nil {
				return fmt.Errorf("warming up %s in %s: %w", gvk.Kind, m.Name, err)
			}
		}
	}
	if c.components, err = clusterComponents(c.env); err != nil {
		return err
	}
	if c.classes, err = startClassReconciler(ctx, c.env.Target); err != nil {
		return err
	}
	return c.measureIdle(ctx)
}

// grantOperator gives the operator the access users give it, with the
// admin credentials only to set it up: in the source, the ServiceAccount
// and RBAC of dist/install.yaml and a token for it; in the target, what
// `manager target-access` applies (dist/target-access.yaml) and a token for
// its ServiceAccount, in the Secret the MoveOperations name.
func (c *clusters) grantOperator(ctx context.Context, b *bench) error {
	dir, err := os.MkdirTemp(b.workDir, "identity-")
	if err != nil {
		return err
	}
	if c.identity, err = b.install.Grant(ctx, c.env.Source.Config, dir); err != nil {
		return fmt.Errorf("giving the operator its installed identity in the source: %w", err)
	}
	manifest, err := os.ReadFile(filepath.Join(b.root, installed.TargetAccessPath))
	if err != nil {
		return err
	}
	kubeconfig, _, err := targetaccess.Grant(ctx, c.env.Target.Config, manifest, targetaccess.Options{})
	if err != nil {
		return fmt.Errorf("making the operator's target credential from %s: %w", installed.TargetAccessPath, err)
	}
	if err := targetaccess.WriteSecret(ctx, c.source, moveNamespace, targetSecret, movev1alpha1.DefaultKubeconfigSecretKey, kubeconfig); err != nil {
		return err
	}
	targetConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the operator's target kubeconfig: %w", err)
	}
	// The manager logs no identity of its own: the bench asks each API
	// server who the operator's credentials are, so that its log says what
	// the move ran as.
	for _, cred := range []struct {
		cluster string
		config  *rest.Config
	}{{"source", c.identity.Config}, {"target", targetConfig}} {
		user, err := whoAmI(ctx, cred.config)
		if err != nil {
			return fmt.Errorf("asking the %s who the operator's credential is: %w", cred.cluster, err)
		}
		say("  the operator's credential in the %s authenticates as %s", cred.cluster, user)
	}
	return nil
}

// whoAmI is the username the API server authenticates cfg as
// (SelfSubjectReview: any authenticated user may ask, nothing is stored).
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// moveTypes lists the kinds both tools move, all and namespaced only, and
// which of them have a status subresource at their storage version.
func moveTypes(ctx context.Context, c client.Client) (all, namespaced []schema.GroupVersionKind, statusSubresource map[schema.GroupKind]bool, _ error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.HasLabels{clusterctlv1.ClusterctlLabel}); err != nil {
		return nil, nil, nil, fmt.Errorf("listing the CRDs labelled %s: %w", clusterctlv1.ClusterctlLabel, err)
	}
	statusSubresource = map[schema.GroupKind]bool{}
	namespaced = []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Secret"), corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	all = append(all, namespaced...)
	for _, crd := range crds.Items {
		for _, v := range crd.Spec.Versions {
			if !v.Storage {
				continue
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			all = append(all, gvk)
			statusSubresource[gvk.GroupKind()] = v.Subresources != nil && v.Subresources.Status != nil
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
				namespaced = append(namespaced, gvk)
			}
		}
	}
	return all, namespaced, statusSubresource, nil
}

// clusterComponents finds the processes of both clusters: etcd and
// kube-apiserver of each, the rest (controller-manager, scheduler, kwok)
// together, and this process, which serves the providers' webhooks and
// runs clusterctl and the baseline.
func clusterComponents(env *testenv.Env) ([]component, error) {
	out := []component{{name: "bench process", pid: os.Getpid()}}
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		pids, err := findProcesses(m.Dir)
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			exe, err := os.Readlink(filepath.Join("/proc", fmt.Sprint(pid), "exe"))
			if err != nil {
				continue
			}
			name := m.Name + " " + filepath.Base(exe)
			switch filepath.Base(exe) {
			case "etcd", "kube-apiserver":
			default:
				name = m.Name + " others"
			}
			out = append(out, component{name: name, pid: pid})
		}
	}
	return out, nil
}

// measureIdle measures the requests each API server serves with nothing
// moving (leases, kwok node heartbeats, the controller-manager), so readers
// can tell a move's requests from the background.
func (c *clusters) measureIdle(ctx context.Context) error {
	before, err := c.sample(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleWindow):
	}
	after, err := c.sample(ctx)
	if err != nil {
		return err
	}
	elapsed := time.Since(began).Seconds()
	c.idle = map[string]float64{}
	for name, s := range after {
		c.idle[name] = s.requests.sub(before[name].requests).total() / elapsed
	}
	say("  idle request rate: source %.1f/s, target %.1f/s", c.idle["source"], c.idle["target"])
	return nil
}

// sample reads both API servers' counters.
func (c *clusters) sample(ctx context.Context) (map[string]serverSample, error) {
	out := map[string]serverSample{}
	for _, m := range []*testenv.Management{c.env.Source, c.env.Target} {
		s, err := sampleServer(ctx, m.Config)
		if err != nil {
			return nil, fmt.Errorf("reading the counters of %s: %w", m.Name, err)
		}
		out[m.Name] = s
	}
	return out, nil
}

// stop stops both clusters and removes their logs unless keepLogs.
func (c *clusters) stop(keepLogs bool) error {
	if c.env == nil {
		return nil
	}
	var classErr error
	if c.classes != nil {
		classErr = c.classes.stop()
	}
	err := errors.Join(classErr, c.env.Stop())
	if keepLogs {
		say("cluster logs kept in %s", c.env.LogDirs())
	} else if err == nil {
		err = c.env.RemoveLogs()
	}
	c.env = nil
	return err
}
