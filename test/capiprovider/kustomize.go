package capiprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The Cluster API module ships its manifests as kustomize bases under
// <provider>/config. The release manifests that `clusterctl init` applies are
// `kustomize build <provider>/config/default`. This file renders the subset of
// kustomize those bases use (resources, strategic-merge patches, labels,
// namePrefix, namespace and the name references they imply) so the local
// clusters get the very objects of a release, without adding kustomize to the
// project's dependencies. Directories of kinds a local cluster cannot serve
// (cert-manager's Certificate and Issuer) are skipped: the harness plays
// cert-manager's part itself.

type kustomization struct {
	Namespace  string   `json:"namespace"`
	NamePrefix string   `json:"namePrefix"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches"`
	Labels []struct {
		IncludeSelectors bool              `json:"includeSelectors"`
		Pairs            map[string]string `json:"pairs"`
	} `json:"labels"`
}

// skippedResourceDirs are kustomize bases whose kinds need cert-manager.
var skippedResourceDirs = map[string]bool{"certmanager": true}

// render builds the kustomization in directory dir of fsys.
func render(fsys fs.FS, dir string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(fsys, path.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading kustomization: %w", err)
	}
	var k kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path.Join(dir, "kustomization.yaml"), err)
	}

	var objs []*unstructured.Unstructured
	for _, res := range k.Resources {
		resPath := path.Join(dir, res)
		info, err := fs.Stat(fsys, resPath)
		if err != nil {
			return nil, fmt.Errorf("resource %s of %s: %w", res, dir, err)
		}
		var more []*unstructured.Unstructured
		switch {
		case info.IsDir() && skippedResourceDirs[path.Base(resPath)]:
			continue
		case info.IsDir():
			more, err = render(fsys, resPath)
		default:
			more, err = readObjects(fsys, resPath)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}

	for _, p := range k.Patches {
		patches, err := readObjects(fsys, path.Join(dir, p.Path))
		if err != nil {
			return nil, err
		}
		for _, patch := range patches {
			if err := applyPatch(objs, patch); err != nil {
				return nil, fmt.Errorf("patch %s of %s: %w", p.Path, dir, err)
			}
		}
	}

	for _, l := range k.Labels {
		for _, o := range objs {
			addLabels(o, l.Pairs, l.IncludeSelectors)
		}
	}
	if k.NamePrefix != "" {
		applyNamePrefix(objs, k.NamePrefix)
	}
	if k.Namespace != "" {
		applyNamespace(objs, k.Namespace)
	}
	return objs, nil
}

// readObjects reads every YAML document of a file.
func readObjects(fsys fs.FS, name string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	return objs, nil
}

func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// patchSchemas gives strategic-merge patches the merge keys of the kinds the
// Cluster API bases patch.
var patchSchemas = map[string]any{
	"Deployment":                     appsv1.Deployment{},
	"CustomResourceDefinition":       apiextensionsv1.CustomResourceDefinition{},
	"MutatingWebhookConfiguration":   admissionregistrationv1.MutatingWebhookConfiguration{},
	"ValidatingWebhookConfiguration": admissionregistrationv1.ValidatingWebhookConfiguration{},
	"ClusterRole":                    rbacv1.ClusterRole{},
	"ClusterRoleBinding":             rbacv1.ClusterRoleBinding{},
	"Role":                           rbacv1.Role{},
	"RoleBinding":                    rbacv1.RoleBinding{},
	"Service":                        corev1.Service{},
	"Namespace":                      corev1.Namespace{},
}

func applyPatch(objs []*unstructured.Unstructured, patch *unstructured.Unstructured) error {
	schema, ok := patchSchemas[patch.GetKind()]
	if !ok {
		return fmt.Errorf("no merge schema for kind %s", patch.GetKind())
	}
	for _, o := range objs {
		if o.GetKind() != patch.GetKind() || o.GetName() != patch.GetName() {
			continue
		}
		original, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		p, err := json.Marshal(patch.Object)
		if err != nil {
			return err
		}
		merged, err := strategicpatch.StrategicMergePatch(original, p, schema)
		if err != nil {
			return fmt.Errorf("merging into %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(merged, &m); err != nil {
			return err
		}
		o.Object = m
		return nil
	}
	return fmt.Errorf("no %s named %s to patch", patch.GetKind(), patch.GetName())
}

// addLabels sets labels on metadata and, for labels that include selectors,
// on the selectors and pod templates that must keep matching them.
func addLabels(o *unstructured.Unstructured, pairs map[string]string, includeSelectors bool) {
	setStringMap(o.Object, pairs, "metadata", "labels")
	if !includeSelectors {
		return
	}
	switch o.GetKind() {
	case "Deployment":
		setStringMap(o.Object, pairs, "spec", "selector", "matchLabels")
		setStringMap(o.Object, pairs, "spec", "template", "metadata", "labels")
	case "Service":
		setStringMap(o.Object, pairs, "spec", "selector")
	}
}

func setStringMap(obj map[string]any, pairs map[string]string, fields ...string) {
	m, _, _ := unstructured.NestedStringMap(obj, fields...)
	if m == nil {
		m = map[string]string{}
	}
	for k, v := range pairs {
		m[k] = v
	}
	_ = unstructured.SetNestedStringMap(obj, m, fields...)
}

// clusterScopedKinds are the cluster-scoped kinds the bases contain.
var clusterScopedKinds = map[string]bool{
	"Namespace":                      true,
	"CustomResourceDefinition":       true,
	"ClusterRole":                    true,
	"ClusterRoleBinding":             true,
	"MutatingWebhookConfiguration":   true,
	"ValidatingWebhookConfiguration": true,
}

// applyNamePrefix renames every object but Namespaces and CRDs (whose names
// are fixed by their content), and updates the references kustomize knows.
func applyNamePrefix(objs []*unstructured.Unstructured, prefix string) {
	renamed := map[string]map[string]string{} // kind -> old -> new
	for _, o := range objs {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if renamed[o.GetKind()] == nil {
			renamed[o.GetKind()] = map[string]string{}
		}
		renamed[o.GetKind()][o.GetName()] = prefix + o.GetName()
		o.SetName(prefix + o.GetName())
	}
	rename := func(kind, name string) string {
		if n, ok := renamed[kind][name]; ok {
			return n
		}
		return name
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			eachWebhookService(o, func(svc map[string]any) {
				if name, ok := svc["name"].(string); ok {
					svc["name"] = rename("Service", name)
				}
			})
		case "CustomResourceDefinition":
			if name, ok, _ := unstructured.NestedString(o.Object, conversionServicePath("name")...); ok {
				_ = unstructured.SetNestedField(o.Object, rename("Service", name), conversionServicePath("name")...)
			}
		case "Deployment":
			path := []string{"spec", "template", "spec", "serviceAccountName"}
			if name, ok, _ := unstructured.NestedString(o.Object, path...); ok {
				_ = unstructured.SetNestedField(o.Object, rename("ServiceAccount", name), path...)
			}
		case "ClusterRoleBinding", "RoleBinding":
			kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
			if name, ok, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ok {
				_ = unstructured.SetNestedField(o.Object, rename(kind, name), "roleRef", "name")
			}
			eachSubject(o, func(s map[string]any) {
				if s["kind"] == "ServiceAccount" {
					if name, ok := s["name"].(string); ok {
						s["name"] = rename("ServiceAccount", name)
					}
				}
			})
		}
	}
}

// applyNamespace moves namespaced objects and the namespaces of references
// into ns, and names the Namespace object ns.
func applyNamespace(objs []*unstructured.Unstructured, ns string) {
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			o.SetName(ns)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			eachWebhookService(o, func(svc map[string]any) { svc["namespace"] = ns })
		case "CustomResourceDefinition":
			if _, ok, _ := unstructured.NestedString(o.Object, conversionServicePath("namespace")...); ok {
				_ = unstructured.SetNestedField(o.Object, ns, conversionServicePath("namespace")...)
			}
		case "ClusterRoleBinding", "RoleBinding":
			eachSubject(o, func(s map[string]any) {
				if s["kind"] == "ServiceAccount" {
					s["namespace"] = ns
				}
			})
		}
		if !clusterScopedKinds[o.GetKind()] {
			o.SetNamespace(ns)
		}
	}
}

func conversionServicePath(field string) []string {
	return []string{"spec", "conversion", "webhook", "clientConfig", "service", field}
}

func eachWebhookService(o *unstructured.Unstructured, f func(map[string]any)) {
	hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			continue
		}
		if cc, ok := hook["clientConfig"].(map[string]any); ok {
			if svc, ok := cc["service"].(map[string]any); ok {
				f(svc)
			}
		}
	}
	_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
}

func eachSubject(o *unstructured.Unstructured, f func(map[string]any)) {
	subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
	for _, s := range subjects {
		if subject, ok := s.(map[string]any); ok {
			f(subject)
		}
	}
	_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
}

func unstructuredString(o *unstructured.Unstructured, fields ...string) (string, bool, error) {
	return unstructured.NestedString(o.Object, fields...)
}
