// Package kubestatemetrics holds the kube-state-metrics custom-resource-state
// configuration for MoveOperations (custom-resource-state.yaml) and its test,
// which runs the file through kube-state-metrics' own code on MoveOperations
// given as the API server returns them, and compares what a scrape gets line
// by line. It needs no cluster, and holds no code but the test.
//
// It is a Go module of its own: kube-state-metrics v2.19.1 is built on
// client-go v0.35, and its metrics store lacks the Bookmark method client-go
// v0.36 added to cache.Store, so it cannot build in the operator's module;
// this one keeps the versions kube-state-metrics pins, and the operator's
// dependencies stay as they are. For the same reason it never imports the
// operator: MoveOperations are unstructured here, checked against the CRD
// the operator ships.
package kubestatemetrics

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kube-state-metrics/v2/pkg/customresourcestate"
	"k8s.io/kube-state-metrics/v2/pkg/metric"
	generator "k8s.io/kube-state-metrics/v2/pkg/metric_generator"
	metricsstore "k8s.io/kube-state-metrics/v2/pkg/metrics_store"
	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v3"
)

const (
	// configFile is the configuration as shipped: users give this very
	// file to kube-state-metrics.
	configFile = "custom-resource-state.yaml"
	// crdFile is the MoveOperation CRD the operator ships, generated from
	// api/v1alpha1 by make manifests.
	crdFile = "../crd/bases/move.cluster.x-k8s.io_moveoperations.yaml"
	// rbacFile grants kube-state-metrics what it needs to read MoveOperations.
	rbacFile = "rbac.yaml"
	// prefix starts the name of every metric of the configuration.
	prefix = "move_operator_moveoperation_"
)

func TestTheConfigurationFitsTheMoveOperationCRD(t *testing.T) {
	crd := loadCRD(t)
	resource := loadResource(t, crd)
	schema := schemaOf(t, crd, resource.GroupVersionKind.Version)

	t.Run("every path names a field of a MoveOperation", func(t *testing.T) {
		// kube-state-metrics only logs a path that finds nothing (at
		// errorLogV, here 4): a misspelt or renamed field would silently
		// leave its metric out.
		for _, p := range pathsOf(resource) {
			if len(p.path) > 0 && p.path[0] == "metadata" {
				continue // ObjectMeta: the CRD's schema does not describe it
			}
			if _, err := field(schema, p.path); err != nil {
				t.Errorf("%s reads %v: %v", p.what, p.path, err)
			}
		}
	})

	t.Run("every gauge reads a number, a boolean or a time", func(t *testing.T) {
		for _, g := range resource.Metrics {
			if g.Each.Type != metric.Gauge || g.Each.Gauge == nil {
				continue
			}
			path := slices.Concat(g.Each.Gauge.Path, g.Each.Gauge.ValueFrom)
			s, err := field(schema, path)
			if err != nil {
				continue // reported above
			}
			if !slices.Contains([]string{"integer", "number", "boolean"}, s.Type) && s.Format != "date-time" {
				t.Errorf("gauge %s reads %v, a %s (format %q): kube-state-metrics makes numbers of numbers, booleans and RFC 3339 times only",
					g.Name, path, s.Type, s.Format)
			}
		}
	})

	t.Run("the phase state set lists every phase, in order", func(t *testing.T) {
		i := slices.IndexFunc(resource.Metrics, func(g customresourcestate.Generator) bool { return g.Name == "phase" })
		if i < 0 || resource.Metrics[i].Each.StateSet == nil {
			t.Fatalf("%s has no state set named phase", configFile)
		}
		s, err := field(schema, []string{"status", "phase"})
		if err != nil {
			t.Fatal(err)
		}
		var phases []string
		for _, e := range s.Enum {
			var phase string
			if err := yaml.Unmarshal(e.Raw, &phase); err != nil {
				t.Fatal(err)
			}
			phases = append(phases, phase)
		}
		if diff := cmp.Diff(phases, resource.Metrics[i].Each.StateSet.List); diff != "" {
			t.Errorf("the phase state set differs from status.phase's enum in %s (-CRD +%s):\n%s", crdFile, configFile, diff)
		}
	})
}

func TestTheMetricsOfAMoveOperation(t *testing.T) {
	crd := loadCRD(t)
	resource := loadResource(t, crd)
	schema := schemaOf(t, crd, resource.GroupVersionKind.Version)

	// Every line a scrape shows for the MoveOperation of file, as
	// metric{labels} value without the prefix and without the labels
	// every line carries (the object's namespace and name, and its group,
	// kind and version), in any order.
	cases := []struct {
		name string
		file string
		want []string
	}{{
		name: "a move in Copying shows its phase, that it is not Ready, and how far it has copied",
		file: "copying.yaml",
		want: []string{
			`info{dry_run="false",target_secret_key="value",target_secret_name="target-kubeconfig"} 1`,
			`phase{phase="Pending"} 0`,
			`phase{phase="Validating"} 0`,
			`phase{phase="Recording"} 0`,
			`phase{phase="ScalingDown"} 0`,
			`phase{phase="Copying"} 1`,
			`phase{phase="Deleting"} 0`,
			`phase{phase="RestoringTarget"} 0`,
			`phase{phase="RestoringSource"} 0`,
			`phase{phase="Done"} 0`,
			`phase{phase="RollingBack"} 0`,
			`phase{phase="Failed"} 0`,
			`status_condition{status="True",type="Validated"} 1`,
			`status_condition{status="False",type="Validated"} 0`,
			`status_condition{status="Unknown",type="Validated"} 0`,
			`status_condition{status="True",type="Ready"} 0`,
			`status_condition{status="False",type="Ready"} 1`,
			`status_condition{status="Unknown",type="Ready"} 0`,
			`status_condition{status="True",type="Reconciling"} 1`,
			`status_condition{status="False",type="Reconciling"} 0`,
			`status_condition{status="Unknown",type="Reconciling"} 0`,
			`status_condition{status="True",type="ObjectsCopied"} 0`,
			`status_condition{status="False",type="ObjectsCopied"} 1`,
			`status_condition{status="Unknown",type="ObjectsCopied"} 0`,
			`objects 480`,
			`objects_copied 312`,
			`objects_deleted 0`,
			`start_time_seconds 1795985933`, // 2026-11-29T20:58:53Z
			// No completion_time_seconds before the end, no failure_info
			// without a failure.
		},
	}, {
		name: "a move that is Done is Ready, and has ended",
		file: "done.yaml",
		want: []string{
			`info{dry_run="false",target_secret_key="kubeconfig",target_secret_name="new-management"} 1`,
			`phase{phase="Pending"} 0`,
			`phase{phase="Validating"} 0`,
			`phase{phase="Recording"} 0`,
			`phase{phase="ScalingDown"} 0`,
			`phase{phase="Copying"} 0`,
			`phase{phase="Deleting"} 0`,
			`phase{phase="RestoringTarget"} 0`,
			`phase{phase="RestoringSource"} 0`,
			`phase{phase="Done"} 1`,
			`phase{phase="RollingBack"} 0`,
			`phase{phase="Failed"} 0`,
			`status_condition{status="True",type="Ready"} 1`,
			`status_condition{status="False",type="Ready"} 0`,
			`status_condition{status="Unknown",type="Ready"} 0`,
			`status_condition{status="True",type="SourceRestored"} 1`,
			`status_condition{status="False",type="SourceRestored"} 0`,
			`status_condition{status="Unknown",type="SourceRestored"} 0`,
			`objects 480`,
			`objects_copied 480`,
			`objects_deleted 452`,
			`start_time_seconds 1795982400`,      // 2026-11-29T20:00:00Z
			`completion_time_seconds 1795984877`, // 2026-11-29T20:41:17Z
		},
	}, {
		name: "a Failed move shows why it failed, and is Stalled",
		file: "failed.yaml",
		want: []string{
			`info{dry_run="false",target_secret_key="value",target_secret_name="target-kubeconfig"} 1`,
			`phase{phase="Pending"} 0`,
			`phase{phase="Validating"} 0`,
			`phase{phase="Recording"} 0`,
			`phase{phase="ScalingDown"} 0`,
			`phase{phase="Copying"} 0`,
			`phase{phase="Deleting"} 0`,
			`phase{phase="RestoringTarget"} 0`,
			`phase{phase="RestoringSource"} 0`,
			`phase{phase="Done"} 0`,
			`phase{phase="RollingBack"} 0`,
			`phase{phase="Failed"} 1`,
			`status_condition{status="True",type="Ready"} 0`,
			`status_condition{status="False",type="Ready"} 1`,
			`status_condition{status="Unknown",type="Ready"} 0`,
			`status_condition{status="True",type="RolledBack"} 1`,
			`status_condition{status="False",type="RolledBack"} 0`,
			`status_condition{status="Unknown",type="RolledBack"} 0`,
			`status_condition{status="True",type="Stalled"} 1`,
			`status_condition{status="False",type="Stalled"} 0`,
			`status_condition{status="Unknown",type="Stalled"} 0`,
			`objects 34`,
			`objects_copied 15`,
			`objects_deleted 0`,
			`start_time_seconds 1795986003`,      // 2026-11-29T21:00:03Z
			`completion_time_seconds 1795986062`, // 2026-11-29T21:01:02Z
			`failure_info{reason="TargetConflict"} 1`,
		},
	}}

	// One scrape of the three, as kube-state-metrics holds every
	// MoveOperation of the cluster in one store.
	objs := make([]*unstructured.Unstructured, len(cases))
	for i, c := range cases {
		objs[i] = loadObject(t, schema, filepath.Join("testdata", c.file))
	}
	text := scrape(t, resource, objs...)
	got := samplesByObject(t, resource, text)

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := objs[i].GetNamespace() + "/" + objs[i].GetName()
			if diff := cmp.Diff(c.want, got[key], cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("the metrics of MoveOperation %s differ (-want +got):\n%s\nkube-state-metrics exposed:\n%s", key, diff, text)
			}
		})
	}

	t.Run("the text is what kube-state-metrics writes", func(t *testing.T) {
		// The lines above are read back from the text; a few, whole, as
		// Prometheus receives them.
		for _, line := range []string{
			`move_operator_moveoperation_phase{customresource_group="move.cluster.x-k8s.io",customresource_kind="MoveOperation",customresource_version="v1alpha1",name="move-fleet",namespace="ops",phase="Copying"} 1`,
			`move_operator_moveoperation_objects_copied{customresource_group="move.cluster.x-k8s.io",customresource_kind="MoveOperation",customresource_version="v1alpha1",name="move-fleet",namespace="ops"} 312`,
			`move_operator_moveoperation_start_time_seconds{customresource_group="move.cluster.x-k8s.io",customresource_kind="MoveOperation",customresource_version="v1alpha1",name="move-fleet",namespace="ops"} 1.795985933e+09`,
			`move_operator_moveoperation_failure_info{customresource_group="move.cluster.x-k8s.io",customresource_kind="MoveOperation",customresource_version="v1alpha1",name="move-conflict",namespace="team-a",reason="TargetConflict"} 1`,
		} {
			if !slices.Contains(strings.Split(text, "\n"), line) {
				t.Errorf("kube-state-metrics did not expose the line\n%s\nIt exposed:\n%s", line, text)
			}
		}
	})
}

func TestTheClusterRoleGrantsWhatKubeStateMetricsNeeds(t *testing.T) {
	crd := loadCRD(t)
	data, err := os.ReadFile(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%s holds %d documents, want 2 (the ClusterRole and its binding)", rbacFile, len(docs))
	}
	role, binding := &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), role); err != nil {
		t.Fatalf("decoding the ClusterRole of %s: %v", rbacFile, err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatalf("decoding the ClusterRoleBinding of %s: %v", rbacFile, err)
	}
	if role.Kind != "ClusterRole" || binding.Kind != "ClusterRoleBinding" {
		t.Fatalf("%s holds a %s and a %s, want a ClusterRole and a ClusterRoleBinding", rbacFile, role.Kind, binding.Kind)
	}
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name {
		t.Errorf("the binding refers to %s %s, want ClusterRole %s", binding.RoleRef.Kind, binding.RoleRef.Name, role.Name)
	}
	grants := func(group, resource, verb string) bool {
		return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, need := range []struct{ group, resource, why string }{
		{crd.Spec.Group, crd.Spec.Names.Plural, "its reflector reads them"},
		{"apiextensions.k8s.io", "customresourcedefinitions", "its discovery finds MoveOperation through them"},
	} {
		for _, verb := range []string{"list", "watch"} {
			if !grants(need.group, need.resource, verb) {
				t.Errorf("the ClusterRole does not grant %s on %s.%s, which kube-state-metrics needs: %s", verb, need.resource, need.group, need.why)
			}
		}
	}
}

// loadCRD reads the MoveOperation CRD the operator ships.
func loadCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decoding %s: %v", crdFile, err)
	}
	return crd
}

// schemaOf returns the schema of the CRD's version.
func schemaOf(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no schema for version %s", crdFile, version)
	return nil
}

// loadResource reads custom-resource-state.yaml as kube-state-metrics does
// (customresourcestate.FromConfig, with its YAML decoder) and returns its
// one resource, with the plural kube-state-metrics' discovery would find in
// the CRD. It decodes strictly as well: kube-state-metrics ignores a key it
// does not know, so a misspelt one (labelFromPath for labelsFromPath) would
// silently do nothing.
func loadResource(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) customresourcestate.Resource {
	t.Helper()
	data, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	// What the kube-state-metrics binary does with the file. The function
	// it returns needs kube-state-metrics' CRD discovery, which needs a
	// cluster: the resource is built from the strict decoding below.
	if _, err := customresourcestate.FromConfig(goyaml.NewDecoder(bytes.NewReader(data)), nil); err != nil {
		t.Fatalf("kube-state-metrics refuses %s: %v", configFile, err)
	}

	var config struct {
		Kind                        string `yaml:"kind"`
		customresourcestate.Metrics `yaml:",inline"`
	}
	decoder := goyaml.NewDecoder(bytes.NewReader(data))
	decoder.KnownFields(true)
	if err := decoder.Decode(&config); err != nil {
		t.Fatalf("decoding %s strictly: %v", configFile, err)
	}
	if config.Kind != "CustomResourceStateMetrics" {
		t.Fatalf("%s has kind %q, want CustomResourceStateMetrics", configFile, config.Kind)
	}
	if n := len(config.Spec.Resources); n != 1 {
		t.Fatalf("%s configures %d resources, want 1 (MoveOperation)", configFile, n)
	}
	resource := config.Spec.Resources[0]
	// As FromConfig does before using them.
	for i := range resource.Metrics {
		resource.Metrics[i].Each.Type = metric.Type(strings.ToLower(string(resource.Metrics[i].Each.Type)))
	}

	gvk := resource.GroupVersionKind
	if gvk.Group != crd.Spec.Group || gvk.Kind != crd.Spec.Names.Kind {
		t.Fatalf("%s is for %s/%s, the CRD is for %s/%s", configFile, gvk.Group, gvk.Kind, crd.Spec.Group, crd.Spec.Names.Kind)
	}
	if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == gvk.Version && v.Served
	}) {
		t.Fatalf("%s is for version %s, which the CRD does not serve", configFile, gvk.Version)
	}
	if p := resource.GetMetricNamePrefix(); p+"_" != prefix {
		t.Fatalf("%s names its metrics %s_*, want %s*", configFile, p, prefix)
	}
	resource.ResourcePlural = crd.Spec.Names.Plural
	return resource
}

// configPath is a path of the configuration, from the object's root, and
// what reads it.
type configPath struct {
	what string
	path []string
}

// pathsOf returns every path the resource's metrics read, from the
// object's root: kube-state-metrics reads a metric's valueFrom and
// labelsFromPath below its path.
func pathsOf(r customresourcestate.Resource) []configPath {
	var paths []configPath
	labels := func(what string, base []string, from map[string][]string) {
		for label, p := range from {
			paths = append(paths, configPath{fmt.Sprintf("%s label %s", what, label), slices.Concat(base, p)})
		}
	}
	labels("every metric's", nil, r.LabelsFromPath)
	for _, g := range r.Metrics {
		what := "metric " + g.Name
		labels(what+"'s", nil, g.LabelsFromPath)
		var meta customresourcestate.MetricMeta
		var valueFrom []string
		switch {
		case g.Each.Gauge != nil:
			meta, valueFrom = g.Each.Gauge.MetricMeta, g.Each.Gauge.ValueFrom
		case g.Each.StateSet != nil:
			meta, valueFrom = g.Each.StateSet.MetricMeta, g.Each.StateSet.ValueFrom
		case g.Each.Info != nil:
			meta = g.Each.Info.MetricMeta
		}
		paths = append(paths, configPath{what, meta.Path})
		if valueFrom != nil {
			paths = append(paths, configPath{what + "'s valueFrom", slices.Concat(meta.Path, valueFrom)})
		}
		labels(what+"'s", meta.Path, meta.LabelsFromPath)
	}
	return paths
}

// field returns the schema of the field at path below s, looking through
// an array into its items as kube-state-metrics' paths do, or an error
// naming the first step s does not have.
func field(s *apiextensionsv1.JSONSchemaProps, path []string) (*apiextensionsv1.JSONSchemaProps, error) {
	for i, name := range path {
		if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
			s = s.Items.Schema
		}
		p, ok := s.Properties[name]
		if !ok {
			return nil, fmt.Errorf("%s has no field %q", strings.Join(append([]string{"<object>"}, path[:i]...), "."), name)
		}
		s = &p
	}
	return s, nil
}

// unknownFields returns the fields of v, at path, that the schema s does
// not have.
func unknownFields(s *apiextensionsv1.JSONSchemaProps, v any, path string) []string {
	var unknown []string
	switch v := v.(type) {
	case map[string]any:
		for name, e := range v {
			p, ok := s.Properties[name]
			switch {
			case ok:
				unknown = append(unknown, unknownFields(&p, e, path+"."+name)...)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				unknown = append(unknown, unknownFields(s.AdditionalProperties.Schema, e, path+"."+name)...)
			default:
				unknown = append(unknown, path+"."+name)
			}
		}
	case []any:
		for i, e := range v {
			if s.Items == nil || s.Items.Schema == nil {
				return append(unknown, path)
			}
			unknown = append(unknown, unknownFields(s.Items.Schema, e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return unknown
}

// loadObject reads a MoveOperation as the API server returns it to
// kube-state-metrics' informer (JSON decoded into unstructured: whole
// numbers are int64), and fails the test if its spec or status has a field
// the CRD does not: the objects must use the API's real field names.
func loadObject(t *testing.T, schema *apiextensionsv1.JSONSchemaProps, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	var unknown []string
	for _, part := range []string{"spec", "status"} {
		p := schema.Properties[part]
		unknown = append(unknown, unknownFields(&p, u.Object[part], part)...)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		t.Fatalf("%s has fields the MoveOperation CRD does not: %s", path, strings.Join(unknown, ", "))
	}
	return u
}

// scrape returns what a scrape of kube-state-metrics in the text format
// gets for objs: the resource's metric families built as kube-state-metrics'
// store builder builds them, filled by its metrics store as its informer
// would, written by its metrics writer after the HTTP handler's rewriting
// of the headers. It fails the test when Prometheus' parser refuses the text.
func scrape(t *testing.T, resource customresourcestate.Resource, objs ...*unstructured.Unstructured) string {
	t.Helper()
	factory, err := customresourcestate.NewCustomResourceMetrics(resource)
	if err != nil {
		t.Fatalf("compiling %s: %v", configFile, err)
	}
	families := factory.MetricFamilyGenerators()
	store := metricsstore.NewMetricsStore(
		generator.ExtractMetricFamilyHeaders(families),
		generator.ComposeMetricGenFuncs(families),
	)
	for _, obj := range objs {
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	writers := metricsstore.SanitizeHeaders(format, metricsstore.MetricsWriterList{
		metricsstore.NewMetricsWriter(factory.Name(), store),
	})
	var out bytes.Buffer
	for _, w := range writers {
		if err := w.WriteAll(&out); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}

// samplesByObject parses text as Prometheus does and returns its samples by
// MoveOperation (namespace/name), each as metric{labels} value without the
// prefix and without the labels every sample of the object carries. It
// fails the test when Prometheus cannot parse the text, when a metric is
// not of the configuration or has lost its help, or when a sample lacks the
// object's labels.
func samplesByObject(t *testing.T, resource customresourcestate.Resource, text string) map[string][]string {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus cannot parse what kube-state-metrics exposes: %v\n%s", err, text)
	}
	help := map[string]string{}
	for _, g := range resource.Metrics {
		help[prefix+g.Name] = g.Help
	}
	gvk := resource.GroupVersionKind
	common := map[string]string{
		"customresource_group":   gvk.Group,
		"customresource_kind":    gvk.Kind,
		"customresource_version": gvk.Version,
	}
	samples := map[string][]string{}
	for name, family := range families {
		want, ok := help[name]
		if !ok {
			t.Errorf("kube-state-metrics exposes %s, which %s does not configure", name, configFile)
			continue
		}
		if family.GetHelp() != want || family.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %s with help %q, want a GAUGE (as the text format shows info metrics and state sets) with help %q",
				name, family.GetType(), family.GetHelp(), want)
		}
		for _, m := range family.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range common {
				if labels[k] != v {
					t.Errorf("a sample of %s has %s=%q, want %q", name, k, labels[k], v)
				}
				delete(labels, k)
			}
			key := labels["namespace"] + "/" + labels["name"]
			delete(labels, "namespace")
			delete(labels, "name")
			var line strings.Builder
			line.WriteString(strings.TrimPrefix(name, prefix))
			for i, k := range slices.Sorted(maps.Keys(labels)) {
				sep := ","
				if i == 0 {
					sep = "{"
				}
				fmt.Fprintf(&line, "%s%s=%q", sep, k, labels[k])
			}
			if len(labels) > 0 {
				line.WriteString("}")
			}
			line.WriteString(" " + strconv.FormatFloat(m.GetGauge().GetValue(), 'f', -1, 64))
			samples[key] = append(samples[key], line.String())
		}
	}
	return samples
}
