package capiprovider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/hostprovider"
	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// ProviderLabel is the label clusterctl puts on every object of a provider.
const ProviderLabel = "cluster.x-k8s.io/provider"

// Options tune Install. The zero value is a good default.
type Options struct {
	// Replicas of every provider controller Deployment. Default 1.
	Replicas int32
	// Timeout bounds Install. Default 3m (seconds alone, much longer on a
	// machine busy with other clusters).
	Timeout time.Duration
	// Logf receives progress lines, e.g. testing.T.Logf. Default: discarded.
	Logf func(format string, args ...any)
	// ColdCaches skips reading every Cluster API type once at the end, so the
	// first LIST of each type meets the 429 a fresh API server answers while
	// its watch cache fills, as an operator meets on a new target.
	ColdCaches bool
	// Controllers, if set, runs each provider's real controllers in this
	// process while its Deployment has a Ready pod (see live.go). Default:
	// no controller runs; only the webhooks are served.
	Controllers *ControllerOptions
	// Hosts installs Metal3's BareMetalHost kind as package hostprovider
	// has it (its CRD, labelled for clusterctl, and the operator's
	// aggregated ClusterRole for it) and, with Controllers, runs its
	// controller among the loop provider's, so it stops and starts with
	// the loop provider's Deployment. Off by default: without it the
	// setup is exactly `clusterctl init --infrastructure loop`.
	Hosts bool
	// InMemory installs CAPD, Cluster API's development infrastructure
	// provider (see docker.go), beside the loop provider, for fleets of
	// DevClusters with its in-memory backend; with Controllers, its
	// controllers run against ControllerOptions.InMemory. Off by default.
	InMemory bool
	// InfrastructureOnly installs only the loop infrastructure provider,
	// beside a Cluster API installed otherwise (package capirelease: an
	// older release, run from its own binaries): no core or kubeadm
	// provider, and no clusterctl inventory CRD, which that release's
	// clusterctl installed. Not with InMemory.
	InfrastructureOnly bool
}

// Installation is the Cluster API management setup of one local cluster, and
// the harness that serves its webhooks.
type Installation struct {
	// Cluster is the local cluster the setup is installed in.
	Cluster *localcluster.Cluster
	// Providers lists core, kubeadm bootstrap, kubeadm control plane and the
	// loop infrastructure provider, in that order.
	Providers []*Provider
	// Duration is how long Install took.
	Duration time.Duration

	stopWatch context.CancelFunc
	watchDone chan struct{}
	errLog    *os.File

	// Live controllers, only with Options.Controllers.
	writes       *writeLog
	loopSwitches *loopprovider.Switches
	loopActivity *loopprovider.Activity
	// hostActivity is set only with Options.Hosts too.
	hostActivity *hostprovider.Activity
	stopLive     context.CancelFunc
	stopOnce     sync.Once
	stopErr      error
}

// Provider is one installed provider: its controller Deployment and the
// webhooks the harness serves on its behalf.
type Provider struct {
	// Name is clusterctl's name of the provider instance and the value of
	// the cluster.x-k8s.io/provider label, e.g. "bootstrap-kubeadm".
	Name string
	// Type is the clusterctl provider type, e.g. BootstrapProvider.
	Type clusterctlv1.ProviderType
	// Version is the installed version.
	Version string
	// Namespace holds the provider's Deployment, Service and ServiceAccount.
	Namespace string
	// Deployment is the name of the controller Deployment.
	Deployment string
	// WebhookService is the name of the Service the webhook configurations
	// and CRD conversion settings point at.
	WebhookService string
	// ClusterIP is the Service's fixed ClusterIP; the harness listens on
	// ClusterIP:443 while the Deployment has Ready pods.
	ClusterIP string

	server      *webhookServer
	podSelector labels.Selector
	spec        *providerSpec
	live        *liveController

	mu      sync.Mutex
	syncErr error
}

// Serving reports whether the provider's webhooks are all served now.
func (p *Provider) Serving() bool {
	on, _ := p.server.state()
	return on
}

// WaitServing waits until the provider's webhooks are all served (serving
// true) or refused (false, its conversion webhook still served after
// SetConversionWhileStopped), which follows the Ready pods of the
// provider's Deployment.
func (p *Provider) WaitServing(ctx context.Context, serving bool) error {
	for {
		on, changed := p.server.state()
		if on == serving {
			return nil
		}
		select {
		case <-ctx.Done():
			p.mu.Lock()
			syncErr := p.syncErr
			p.mu.Unlock()
			return errors.Join(fmt.Errorf("waiting for the webhooks of provider %s to be serving=%t: %w", p.Name, serving, ctx.Err()), syncErr)
		case <-changed:
		}
	}
}

// SetConversionWhileStopped keeps every provider's CRD conversion webhook
// served while its Deployment has no Ready pod (on), its admission webhooks
// refused as before; off (the default) stops both, as a real provider
// scaled to zero does. It stands for a provider whose controllers stop
// while its conversion keeps serving, so the bench can measure what that
// would change in a move.
func (i *Installation) SetConversionWhileStopped(on bool) error {
	var errs []error
	for _, p := range i.Providers {
		errs = append(errs, p.server.setConversionWhileStopped(on))
	}
	return errors.Join(errs...)
}

// Provider returns the installed provider named name (see the constants
// CoreProvider etc.), or nil.
func (i *Installation) Provider(name string) *Provider {
	for _, p := range i.Providers {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Install installs the Cluster API management setup into c as
// `clusterctl init --infrastructure loop` leaves it (with ClusterTopology
// enabled), starts serving each provider's webhooks while its Deployment has
// Ready pods, and returns once every Deployment is Available, every webhook
// serves and (unless Options.ColdCaches) every Cluster API type has been
// read once (a fresh API server answers the first LIST of a type with 429
// while its watch cache fills).
// Stopping the cluster stops the installation too.
func Install(ctx context.Context, c *localcluster.Cluster, opts Options) (_ *Installation, err error) {
	began := time.Now()
	opts.defaults()
	if opts.InfrastructureOnly && opts.InMemory {
		return nil, errors.New("installing Cluster API: InMemory needs the core provider, which InfrastructureOnly leaves out")
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	comps, err := renderedComponents(ctx)
	if err != nil {
		return nil, err
	}
	if err := configureProcessWide(comps); err != nil {
		return nil, err
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", c, err)
	}
	ca, err := newCertificateAuthority(c.Name + "-webhook-ca")
	if err != nil {
		return nil, err
	}

	inst := &Installation{Cluster: c}
	// Stopping the cluster stops the webhook servers first, even if the
	// caller forgets: they listen on the cluster's addresses.
	c.AddStopHook(inst.Stop)
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("installing Cluster API into %s: %w", c, err), inst.Stop())
		}
	}()

	objs, err := inst.prepareProviders(comps, ca, opts)
	if err != nil {
		return nil, err
	}
	if opts.Hosts {
		hostObjs, err := hostObjects()
		if err != nil {
			return nil, err
		}
		objs = append(objs, hostObjs...)
	}

	if opts.Controllers != nil {
		if opts.Hosts {
			inst.hostActivity = &hostprovider.Activity{}
		}
		if err := inst.startControllers(opts.Controllers); err != nil {
			return nil, err
		}
	}
	prepared := time.Since(began)
	if err := inst.watchPods(c); err != nil {
		return nil, err
	}
	if err := applyInPhases(ctx, cl, objs); err != nil {
		return nil, err
	}
	applied := time.Since(began)
	if err := inst.waitReady(ctx, cl, opts.Replicas); err != nil {
		return nil, err
	}
	available := time.Since(began)
	if !opts.ColdCaches {
		if err := warmUp(ctx, cl, objs); err != nil {
			return nil, err
		}
	}
	inst.Duration = time.Since(began)
	opts.Logf("Cluster API management setup installed in %s in %s (rendered %s, applied %s, available %s, warmed up %s)",
		c.Name, inst.Duration.Round(time.Millisecond), prepared.Round(time.Millisecond), applied.Round(time.Millisecond),
		available.Round(time.Millisecond), inst.Duration.Round(time.Millisecond))
	return inst, nil
}

func (o *Options) defaults() {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// prepareProviders returns the objects to apply, the clusterctl inventory
// CRD then each provider's objects fitted to the cluster (prepareProvider),
// and sets up, without starting them, each provider's webhook server.
func (i *Installation) prepareProviders(comps []*components, ca *certificateAuthority, opts Options) ([]*unstructured.Unstructured, error) {
	c := i.Cluster
	var objs []*unstructured.Unstructured
	if !opts.InfrastructureOnly {
		inventoryCRDs, err := decodeObjects(clusterctlconfig.ClusterctlAPIManifest)
		if err != nil {
			return nil, fmt.Errorf("parsing the clusterctl inventory CRD: %w", err)
		}
		for _, o := range inventoryCRDs {
			// clusterctl labels its inventory CRD only with this.
			o.SetLabels(map[string]string{clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue})
		}
		objs = append(objs, inventoryCRDs...)
	}

	errLogFile, err := os.OpenFile(filepath.Join(c.LogDir, "webhooks.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the webhook log: %w", err)
	}
	i.errLog = errLogFile
	errLog := log.New(errLogFile, "", log.LstdFlags|log.Lmicroseconds)
	for _, comp := range comps {
		if (comp.spec.capd && !opts.InMemory) || (opts.InfrastructureOnly && !comp.spec.loop) {
			continue
		}
		p, provObjs, cert, err := prepareProvider(c, comp, ca, opts.Replicas)
		if err != nil {
			return nil, err
		}
		handler, err := newWebhookHandler(comp.spec, c.Config)
		if err != nil {
			return nil, err
		}
		p.server = newWebhookServer(p.ClusterIP+":443", handler, cert.tls, errLog)
		p.spec = comp.spec
		i.Providers = append(i.Providers, p)
		objs = append(objs, provObjs...)
	}
	return objs, nil
}

// waitReady waits until every provider's Deployment is Available, its
// webhooks serve and, when they run, its controllers too.
func (i *Installation) waitReady(ctx context.Context, cl client.Client, replicas int32) error {
	for _, p := range i.Providers {
		if err := waitAvailable(ctx, cl, p, replicas); err != nil {
			return err
		}
		if err := p.WaitServing(ctx, true); err != nil {
			return err
		}
		if p.live != nil {
			if err := p.WaitControllers(ctx, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareProvider makes a provider's rendered objects fit cluster c: the
// Service's fixed ClusterIP, CA bundles (cert-manager's cainjector), the
// serving certificate Secret (cert-manager), fake-node placement of the pods
// (kwok), and clusterctl's inventory entry.
func prepareProvider(c *localcluster.Cluster, comp *components, ca *certificateAuthority, replicas int32) (*Provider, []*unstructured.Unstructured, *servingCert, error) {
	clusterIP, err := c.ServiceIP(comp.spec.serviceHost)
	if err != nil {
		return nil, nil, nil, err
	}
	prefix := strings.TrimSuffix(comp.service, "webhook-service")
	cert, err := ca.issue(comp.service, comp.namespace, clusterIP)
	if err != nil {
		return nil, nil, nil, err
	}
	caBundle := base64.StdEncoding.EncodeToString(ca.certPEM)
	injectFrom := comp.namespace + "/" + prefix + "serving-cert"

	p := &Provider{
		Name:           comp.spec.manifestLabel(),
		Type:           comp.spec.providerType,
		Version:        comp.version,
		Namespace:      comp.namespace,
		Deployment:     comp.deployment,
		WebhookService: comp.service,
		ClusterIP:      clusterIP,
	}

	objs := comp.deepCopy()
	if err := p.fit(objs, comp, clusterIP, caBundle, injectFrom, replicas); err != nil {
		return nil, nil, nil, err
	}
	return p, append(objs, servingCertSecret(comp, prefix, cert, caBundle), inventoryEntry(comp, p.Name)), cert, nil
}

// fit makes a provider's objects fit the cluster: its webhook Service at
// clusterIP (and its pods selected by p), CA bundles and cert-manager's
// annotations on webhook configurations and CRDs, and pods on fake nodes.
func (p *Provider) fit(objs []*unstructured.Unstructured, comp *components, clusterIP, caBundle, injectFrom string, replicas int32) error {
	for _, o := range objs {
		switch o.GetKind() {
		case "Service":
			_ = unstructured.SetNestedField(o.Object, clusterIP, "spec", "clusterIP")
			_ = unstructured.SetNestedStringSlice(o.Object, []string{clusterIP}, "spec", "clusterIPs")
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			if len(sel) == 0 {
				return fmt.Errorf("webhook Service %s/%s of provider %s has no selector", comp.namespace, comp.service, p.Name)
			}
			p.podSelector = labels.SelectorFromSet(sel)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				if hook, ok := h.(map[string]any); ok {
					if cc, ok := hook["clientConfig"].(map[string]any); ok {
						cc["caBundle"] = caBundle
					}
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
			setAnnotation(o, "cert-manager.io/inject-ca-from", injectFrom)
		case "CustomResourceDefinition":
			if strategy, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); strategy == "Webhook" {
				_ = unstructured.SetNestedField(o.Object, caBundle, "spec", "conversion", "webhook", "clientConfig", "caBundle")
			}
			setAnnotation(o, "cert-manager.io/inject-ca-from", injectFrom)
		case "Deployment":
			if err := placeOnFakeNodes(o, replicas); err != nil {
				return fmt.Errorf("deployment of provider %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// hostObjects are what Options.Hosts installs: the BareMetalHost CRD, as
// Metal3 installs it beside clusterctl's providers rather than through
// them (so without a provider label), and the ClusterRole a user applies
// for the operator to move its objects.
func hostObjects() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, obj := range []runtime.Object{hostprovider.CRD(), hostprovider.OperatorRole()} {
		fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("preparing the BareMetalHost kind: %w", err)
		}
		out = append(out, &unstructured.Unstructured{Object: fields})
	}
	return out, nil
}

// servingCertSecret is the Secret of a provider's serving certificate, as
// cert-manager writes it.
func servingCertSecret(comp *components, prefix string, cert *servingCert, caBundle string) *unstructured.Unstructured {
	certSecret := &unstructured.Unstructured{}
	certSecret.SetAPIVersion("v1")
	certSecret.SetKind("Secret")
	certSecret.SetNamespace(comp.namespace)
	certSecret.SetName(comp.service + "-cert")
	certSecret.SetAnnotations(map[string]string{"cert-manager.io/certificate-name": prefix + "serving-cert"})
	_ = unstructured.SetNestedField(certSecret.Object, string(corev1.SecretTypeTLS), "type")
	_ = unstructured.SetNestedStringMap(certSecret.Object, map[string]string{
		"tls.crt": base64.StdEncoding.EncodeToString(cert.certPEM),
		"tls.key": base64.StdEncoding.EncodeToString(cert.keyPEM),
		"ca.crt":  caBundle,
	}, "data")
	return certSecret
}

// inventoryEntry is clusterctl's inventory entry of the provider name.
func inventoryEntry(comp *components, name string) *unstructured.Unstructured {
	inventory := &unstructured.Unstructured{}
	inventory.SetAPIVersion(clusterctlv1.GroupVersion.String())
	inventory.SetKind("Provider")
	inventory.SetNamespace(comp.namespace)
	inventory.SetName(name)
	inventory.SetLabels(map[string]string{
		clusterctlv1.ClusterctlLabel:     "",
		ProviderLabel:                    name,
		clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue,
	})
	_ = unstructured.SetNestedField(inventory.Object, comp.spec.name, "providerName")
	_ = unstructured.SetNestedField(inventory.Object, string(comp.spec.providerType), "type")
	_ = unstructured.SetNestedField(inventory.Object, comp.version, "version")
	return inventory
}

func setAnnotation(o *unstructured.Unstructured, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// placeOnFakeNodes sets the replica count and lets the pods run on kwok's
// fake nodes, the one change to the release Deployment a local cluster needs.
func placeOnFakeNodes(o *unstructured.Unstructured, replicas int32) error {
	nodeSelector, tolerations := localcluster.PodPlacement()
	if err := unstructured.SetNestedField(o.Object, int64(replicas), "spec", "replicas"); err != nil {
		return err
	}
	if err := unstructured.SetNestedStringMap(o.Object, nodeSelector, "spec", "template", "spec", "nodeSelector"); err != nil {
		return err
	}
	existing, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "tolerations")
	for _, t := range tolerations {
		existing = append(existing, map[string]any{
			"key": t.Key, "operator": string(t.Operator), "value": t.Value, "effect": string(t.Effect),
		})
	}
	return unstructured.SetNestedSlice(o.Object, existing, "spec", "template", "spec", "tolerations")
}

// installPhases orders creation the way clusterctl does: namespaces, then
// CRDs (established before anything uses them), then the rest, with the
// inventory last.
var installPhases = [][]string{
	{"Namespace"},
	{"CustomResourceDefinition"},
	{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ConfigMap", "Service"},
	{"Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"},
	{"Provider"},
}

func applyInPhases(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	placed := 0
	for _, kinds := range installPhases {
		var batch []*unstructured.Unstructured
		for _, o := range objs {
			for _, k := range kinds {
				if o.GetKind() == k {
					batch = append(batch, o)
				}
			}
		}
		placed += len(batch)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for _, o := range batch {
			g.Go(func() error {
				if err := cl.Create(gctx, o); err != nil {
					return fmt.Errorf("creating %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if kinds[0] == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, cl, batch); err != nil {
				return err
			}
		}
	}
	if placed != len(objs) {
		var unplaced []string
		for _, o := range objs {
			found := false
			for _, kinds := range installPhases {
				for _, k := range kinds {
					found = found || o.GetKind() == k
				}
			}
			if !found {
				unplaced = append(unplaced, o.GetKind()+" "+o.GetName())
			}
		}
		return fmt.Errorf("manifests hold kinds with no install phase: %s", strings.Join(unplaced, ", "))
	}
	return nil
}

func waitEstablished(ctx context.Context, cl client.Client, crds []*unstructured.Unstructured) error {
	for _, o := range crds {
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				return false, nil //nolint:nilerr // retried until the deadline
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", o.GetName(), err)
		}
	}
	return nil
}

func waitAvailable(ctx context.Context, cl client.Client, p *Provider, replicas int32) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Deployment}, d); err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= replicas, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Deployment %s/%s of provider %s to become Available: %w", p.Namespace, p.Deployment, p.Name, err)
	}
	return nil
}

// warmUp lists every custom resource type once, so that nobody meets the 429
// a fresh API server answers while a type's watch cache initialises.
func warmUp(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			name, _ := vm["name"].(string)
			if served, _ := vm["served"].(bool); !served {
				continue
			}
			storage, _ := vm["storage"].(bool)
			if !storage {
				// Reading another version goes through the conversion
				// webhook; the storage version is what warms the cache.
				continue
			}
			gvk := schema.GroupVersionKind{Group: group, Version: name, Kind: kind + "List"}
			g.Go(func() error {
				list := &metav1.PartialObjectMetadataList{}
				list.SetGroupVersionKind(gvk)
				if err := cl.List(gctx, list, client.Limit(1)); err != nil {
					return fmt.Errorf("warming up %s: %w", gvk.GroupKind(), err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// watchPods starts serving a provider's webhooks when a pod selected by its
// webhook Service is Ready and not terminating, and stops when none is: what
// a Service's endpoints do in a real cluster.
func (i *Installation) watchPods(c *localcluster.Cluster) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("creating a client for the pod watch: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ProviderLabel }))
	podInformer := factory.Core().V1().Pods()
	informer := podInformer.Informer()
	lister := podInformer.Lister()
	sync := func() {
		for _, p := range i.Providers {
			if p.live != nil {
				p.live.poke()
			}
			pods, err := lister.Pods(p.Namespace).List(p.podSelector)
			ready := err == nil && anyReady(pods)
			err = p.server.setServing(ready)
			p.mu.Lock()
			p.syncErr = err
			p.mu.Unlock()
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { sync() },
		UpdateFunc: func(any, any) { sync() },
		DeleteFunc: func(any) { sync() },
	}); err != nil {
		return fmt.Errorf("watching provider pods: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	i.stopWatch = cancel
	i.watchDone = make(chan struct{})
	go func() {
		defer close(i.watchDone)
		informer.Run(ctx.Done())
	}()
	liveCtx, stopLive := context.WithCancel(context.Background())
	i.stopLive = stopLive
	for _, p := range i.Providers {
		if p.live != nil {
			p.live.lister = lister
			go p.live.loop(liveCtx)
		}
	}
	return nil
}

func anyReady(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// Stop stops watching pods and closes every webhook server. It is safe to
// call more than once; stopping the cluster calls it too.
func (i *Installation) Stop() error {
	i.stopOnce.Do(func() {
		// Controllers first, while the API server still answers their
		// graceful shutdown (and the pod finalizers can be removed).
		if i.stopLive != nil {
			i.stopLive()
			for _, p := range i.Providers {
				if p.live != nil {
					<-p.live.done
				}
			}
		}
		if i.stopWatch != nil {
			i.stopWatch()
			<-i.watchDone
		}
		var errs []error
		for _, p := range i.Providers {
			if p.server != nil {
				errs = append(errs, p.server.stop())
			}
		}
		if i.errLog != nil {
			errs = append(errs, i.errLog.Close())
		}
		i.stopErr = errors.Join(errs...)
	})
	return i.stopErr
}
