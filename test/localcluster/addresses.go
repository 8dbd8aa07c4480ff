package localcluster

import (
	"errors"
	"fmt"
	"net"
)

// Loopback ranges of cluster N (1..254). The API server rejects loopback
// addresses in Endpoints and EndpointSlices, but not as a Service's ClusterIP:
// giving each cluster its own loopback Service range lets the test process
// serve a Service by listening on its ClusterIP, which the API server dials.
const (
	serviceRangeFormat = "127.96.%d.0/24"
	podRangeFormat     = "127.97.%d.0/24"
	nodeIPFormat       = "127.98.%d.%d"

	// reservationPort is where a cluster holds a listener on 127.96.N.1 for its
	// whole life, so that no other cluster, in this process or another one
	// (go test runs package binaries in parallel), picks the same N. The
	// kernel frees it when the process dies, so a crash leaks nothing.
	reservationPort = 65000
	maxIndex        = 254
)

// reserveIndex returns the lowest free cluster index and the listener that
// holds it; close the listener to release the index.
func reserveIndex() (int, net.Listener, error) {
	var lastErr error
	for n := 1; n <= maxIndex; n++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.96.%d.1:%d", n, reservationPort))
		if err == nil {
			return n, l, nil
		}
		lastErr = err
	}
	return 0, nil, fmt.Errorf("no free loopback range 127.96.N.0/24 for a local cluster: %w",
		errors.Join(errors.New("all 254 taken"), lastErr))
}

// ServiceCIDR is the cluster's Service range, 127.96.N.0/24.
func (c *Cluster) ServiceCIDR() string { return fmt.Sprintf(serviceRangeFormat, c.Index) }

// PodCIDR is the range kwok assigns pod IPs from, 127.97.N.0/24.
func (c *Cluster) PodCIDR() string { return fmt.Sprintf(podRangeFormat, c.Index) }

// ServiceIP returns host number h (2..254) of the Service range, for a Service
// with a fixed spec.clusterIP. Host 1 is the "kubernetes" Service, which the
// API server allocates itself.
func (c *Cluster) ServiceIP(h int) (string, error) {
	if h < 2 || h > 254 {
		return "", fmt.Errorf("service IP host number %d out of range 2..254", h)
	}
	return fmt.Sprintf("127.96.%d.%d", c.Index, h), nil
}
