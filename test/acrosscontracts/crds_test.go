//go:build cluster

package acrosscontracts_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/gomodule"
	"github.com/move-operator/move-operator/test/movetest"
)

// olderCAPI is the last release of Cluster API's v1beta1 contract: it
// stores its kinds at v1beta1 (ExtensionConfig at v1alpha1).
const olderCAPI = "v1.10.9"

// olderCRDDirs are where that release keeps the CRDs of its core, kubeadm
// bootstrap and kubeadm control plane providers.
var olderCRDDirs = []string{"config/crd/bases", "bootstrap/kubeadm/config/crd/bases", "controlplane/kubeadm/config/crd/bases"}

var older struct {
	sync.Once
	err error
}

// olderClusterAPIInSource replaces, once per test binary, the source's
// CRDs of Cluster API's own kinds (v1.14's, stored at v1beta2) with
// v1.10.9's, from the module cache, labelled as the ones they replace: the
// source then stores those kinds at v1beta1 as a v1.10 management cluster
// does. Only the storage version is served, and no conversion webhook is
// named: the source's objects are only ever read and written at it. The
// providers' kinds (the loop infrastructure provider's) stay as installed,
// at the version the target stores them at too.
func olderClusterAPIInSource(t *testing.T) {
	t.Helper()
	older.Do(func() { older.err = installOlderCRDs(t) })
	if older.err != nil {
		t.Fatalf("giving the source Cluster API %s's CRDs: %v", olderCAPI, older.err)
	}
}

func installOlderCRDs(t *testing.T) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	c := movetest.Env.Source.Client
	crds, err := olderCRDs(ctx)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		installed := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, installed); err != nil {
			return fmt.Errorf("reading the installed CRD %s: %w", crd.Name, err)
		}
		crd.Labels = installed.Labels
		if err := c.Delete(ctx, installed); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextensionsv1.CustomResourceDefinition{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err != nil {
			return fmt.Errorf("waiting for the CRD %s to be gone: %w", crd.Name, err)
		}
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("creating the CRD %s of Cluster API %s: %w", crd.Name, olderCAPI, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the CRD %s to be established: %w", crd.Name, err)
		}
	}
	t.Logf("the source has Cluster API %s's %d CRDs of its own kinds, in %s", olderCAPI, len(crds), time.Since(began).Round(time.Millisecond))
	return nil
}

// olderCRDs reads the CRDs of the older release, each with its storage
// version alone.
func olderCRDs(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	root, err := gomodule.Download(ctx, "sigs.k8s.io/cluster-api", olderCAPI)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range olderCRDDirs {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("no CRDs in %s of sigs.k8s.io/cluster-api@%s (%v)", dir, olderCAPI, err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := d.Decode(crd); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					return nil, fmt.Errorf("reading %s: %w", f, err)
				}
				if crd.Name == "" {
					continue
				}
				var storage []apiextensionsv1.CustomResourceDefinitionVersion
				for _, v := range crd.Spec.Versions {
					if v.Storage {
						storage = append(storage, v)
					}
				}
				crd.Spec.Versions = storage
				crd.Spec.Conversion = nil
				crd.ObjectMeta = metav1.ObjectMeta{Name: crd.Name, Annotations: crd.Annotations}
				out = append(out, crd)
			}
		}
	}
	return out, nil
}

// storageVersionOf returns the version the cluster of c stores the CRD
// named name at.
func storageVersionOf(ctx context.Context, c client.Client, name string) (string, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return "", err
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			versions = append(versions, v.Name)
		}
	}
	return strings.Join(versions, ","), nil
}
