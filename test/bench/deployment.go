package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// managerManifest is the operator's Deployment as installed.
const managerManifest = "config/manager/manager.yaml"

// deployedGoMemLimit is the GOMEMLIMIT the operator's Deployment gives its
// manager container, in bytes, so that the bench runs the operator with the
// memory settings it has when installed; "" when the Deployment sets none.
// The Deployment takes it from the container's resources
// (resourceFieldRef) or gives it literally.
func deployedGoMemLimit(root string) (string, error) {
	path := filepath.Join(root, managerManifest)
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s holds no Deployment with a manager container", path)
		} else if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				return goMemLimitOf(c)
			}
		}
	}
}

func goMemLimitOf(c corev1.Container) (string, error) {
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil {
			return e.Value, nil
		}
		resources := map[string]*resource.Quantity{
			"requests.memory": c.Resources.Requests.Memory(),
			"limits.memory":   c.Resources.Limits.Memory(),
		}
		ref := e.ValueFrom.ResourceFieldRef.Resource
		q, ok := resources[ref]
		if !ok || q.IsZero() {
			return "", fmt.Errorf("the manager container's GOMEMLIMIT comes from %q, which %s does not set", ref, managerManifest)
		}
		return strconv.FormatInt(q.Value(), 10), nil
	}
	return "", nil
}
