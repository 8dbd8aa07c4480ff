// Package devfleet creates, in a local management cluster with CAPD
// installed (capiprovider.Options.InMemory), a fleet of workload clusters of
// CAPD's in-memory backend, the way a user creates them: the objects a
// cluster template holds, and nothing else. The controllers do the rest
// (KubeadmControlPlane, MachineDeployments, Machines, KubeadmConfigs,
// DevMachines, VMs in the in-memory cloud, Nodes, etcd members), so the
// fleet is only as provisioned as the live controllers make it: wait with
// takeover.Available and takeover.Running.
//
//	f, err := devfleet.Create(ctx, c, devfleet.Options{Namespace: ns, Clusters: 2})
//
// Clusters alternate between two shapes, classic first:
//
//   - ClusterClass-based: upstream's own templates, read from the
//     sigs.k8s.io/cluster-api/test module this binary is built with
//     (infrastructure/docker/templates/clusterclass-in-memory.yaml, once per
//     namespace, and cluster-template-in-memory.yaml per cluster);
//   - classic: the same objects written out without a ClusterClass
//     (classic.yaml here), as upstream's examples do for Docker machines.
//
// Two changes to upstream's objects, both said where they are made:
// every DevCluster carries an annotation (CAPD's in-memory backend crashes
// on a DevCluster without any, see withAnnotation), and the simulated
// start-up durations are shortened (Options.StartupDuration).
package devfleet

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	dockerwebhooks "sigs.k8s.io/cluster-api/test/infrastructure/docker/webhooks"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/gomodule"
)

//go:embed classic.yaml
var classicTemplate []byte

// Options tune Create.
type Options struct {
	// Namespace holds the fleet; it must exist. Required.
	Namespace string
	// Clusters is how many workload clusters, alternating classic and
	// ClusterClass-based, the first classic. Default 2.
	Clusters int
	// Prefix names the clusters <prefix>-<i>. Default "dev".
	Prefix string
	// ControlPlane and Workers are each cluster's Machines. Default 1 each.
	ControlPlane, Workers int
	// KubernetesVersion of the workload clusters. Default v1.34.2.
	KubernetesVersion string
	// WithoutAnnotation leaves the DevClusters as upstream's templates
	// make them, without annotations: only for the test that shows why
	// every DevCluster gets one (see withAnnotation).
	WithoutAnnotation bool
	// StartupDuration replaces upstream's simulated start-up durations
	// (10 s per VM, 2 s per Node, API server and etcd member), so a fleet
	// is provisioned in seconds. Default 1s.
	StartupDuration time.Duration
}

func (o *Options) defaults() error {
	if o.Namespace == "" {
		return errors.New("devfleet: Options.Namespace is required")
	}
	if o.Clusters <= 0 {
		o.Clusters = 2
	}
	if o.Prefix == "" {
		o.Prefix = "dev"
	}
	if o.ControlPlane <= 0 {
		o.ControlPlane = 1
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = "v1.34.2"
	}
	if o.StartupDuration <= 0 {
		o.StartupDuration = time.Second
	}
	return nil
}

// ClassName is the ClusterClass upstream's template defines.
const ClassName = "in-memory"

// Create creates the fleet's objects in c.
func Create(ctx context.Context, c client.Client, opts Options) (*fleet.Fleet, error) {
	began := time.Now()
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	templates, err := templatesDir(ctx)
	if err != nil {
		return nil, err
	}
	f := &fleet.Fleet{Namespaces: []string{opts.Namespace}, Objects: map[string]int{}}
	class, err := readTemplate(filepath.Join(templates, "clusterclass-in-memory.yaml"), opts, "")
	if err != nil {
		return nil, err
	}
	if err := create(ctx, c, f, class); err != nil {
		return nil, err
	}
	f.ClusterClasses = append(f.ClusterClasses, client.ObjectKey{Namespace: opts.Namespace, Name: ClassName})
	for i := range opts.Clusters {
		wc := fleet.WorkloadCluster{Namespace: opts.Namespace, Name: fmt.Sprintf("%s-%d", opts.Prefix, i), Shape: fleet.Classic}
		var objs []*unstructured.Unstructured
		if i%2 == 1 {
			wc.Shape, wc.ClassRef = fleet.ClusterClass, &f.ClusterClasses[0]
			objs, err = readTemplate(filepath.Join(templates, "cluster-template-in-memory.yaml"), opts, wc.Name)
		} else {
			objs, err = parse(classicTemplate, opts, wc.Name)
		}
		if err != nil {
			return nil, err
		}
		if err := create(ctx, c, f, objs); err != nil {
			return nil, err
		}
		f.Clusters = append(f.Clusters, wc)
	}
	f.Duration = time.Since(began)
	return f, nil
}

// templatesDir is CAPD's templates directory in the module compiled in.
func templatesDir(ctx context.Context) (string, error) {
	dir, _, err := gomodule.Dir(ctx, "sigs.k8s.io/cluster-api/test", (*dockerwebhooks.DevCluster).SetupWebhookWithManager,
		"infrastructure/docker/webhooks/alias.go")
	if err != nil {
		return "", fmt.Errorf("finding CAPD's templates: %w", err)
	}
	return filepath.Join(dir, "infrastructure", "docker", "templates"), nil
}

func readTemplate(path string, opts Options, cluster string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading CAPD's template: %w", err)
	}
	objs, err := parse(data, opts, cluster)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return objs, nil
}

// create creates objs in order, counting them in f. A create the API
// server or a webhook could not answer in time is tried again
// (fleet.RetryTransient): on a loaded machine the Cluster webhook's read of
// the ClusterClass now and then times out.
func create(ctx context.Context, c client.Client, f *fleet.Fleet, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		err := fleet.RetryTransient(ctx, func() error { return c.Create(ctx, o) })
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		f.Objects[o.GetKind()]++
	}
	return nil
}

// parse substitutes a template's variables as clusterctl generate cluster
// does and decodes its objects, in the fleet's namespace, with the two
// changes the package doc names.
func parse(data []byte, opts Options, cluster string) ([]*unstructured.Unstructured, error) {
	data = substitute(data, map[string]string{
		"CLUSTER_NAME":                cluster,
		"NAMESPACE":                   opts.Namespace,
		"KUBERNETES_VERSION":          opts.KubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": strconv.Itoa(opts.ControlPlane),
		"WORKER_MACHINE_COUNT":        strconv.Itoa(opts.Workers),
	})
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding: %w", err)
		}
		if len(o.Object) == 0 {
			continue
		}
		o.SetNamespace(opts.Namespace)
		if !opts.WithoutAnnotation {
			withAnnotation(o)
		}
		shortenStartup(o, opts.StartupDuration)
		objs = append(objs, o)
	}
}

var variable = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:=([^}]*))?\}`)

// substitute replaces ${NAME} and ${NAME:=default} as clusterctl does.
func substitute(data []byte, values map[string]string) []byte {
	return variable.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := variable.FindSubmatch(m)
		if v, ok := values[string(sub[1])]; ok {
			return []byte(v)
		}
		return sub[3]
	})
}

// annotationWorkaround is the annotation every DevCluster gets. CAPD's
// in-memory backend (v1.13.7, v1.14.2) records its listener by assigning
// into the DevCluster's annotations without making the map first, so a
// DevCluster created without any annotation crashes its reconciler
// ("assignment to entry in nil map") and is never provisioned. A user of
// the in-memory provider meets it with upstream's own templates.
const annotationWorkaround = "move-operator.io/capd-nil-annotations-workaround"

// withAnnotation gives a DevCluster, or the DevClusters a
// DevClusterTemplate makes, an annotation.
func withAnnotation(o *unstructured.Unstructured) {
	switch o.GetKind() {
	case "DevCluster":
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[annotationWorkaround] = ""
		o.SetAnnotations(a)
	case "DevClusterTemplate":
		_ = unstructured.SetNestedStringMap(o.Object, map[string]string{annotationWorkaround: ""}, "spec", "template", "metadata", "annotations")
	}
}

// shortenStartup sets every simulated start-up duration of a
// DevMachineTemplate's in-memory backend to d.
func shortenStartup(o *unstructured.Unstructured, d time.Duration) {
	if o.GetKind() != "DevMachineTemplate" {
		return
	}
	for _, part := range []string{"vm", "node", "apiServer", "etcd"} {
		path := []string{"spec", "template", "spec", "backend", "inMemory", part, "provisioning", "startupDuration"}
		if _, found, _ := unstructured.NestedString(o.Object, path...); found {
			_ = unstructured.SetNestedField(o.Object, d.String(), path...)
		}
	}
}
