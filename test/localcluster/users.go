package localcluster

import (
	"fmt"

	"k8s.io/client-go/rest"
)

// AddUser provisions another client certificate user in system:masters and
// returns its client configuration and a self-contained kubeconfig written
// under the cluster's directory. Tests use it to give the operator an
// identity of its own, apart from the admin user the tests write with.
func (c *Cluster) AddUser(name string) (*rest.Config, string, error) {
	cfg, err := c.addUser(name)
	if err != nil {
		return nil, "", err
	}
	path := c.path("kubeconfig-" + name)
	if err := writeKubeconfig(path, c.Name, name, cfg); err != nil {
		return nil, "", fmt.Errorf("user %s of local cluster %s: %w", name, c.Name, err)
	}
	return cfg, path, nil
}
