package workload

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// KeyPair is a PEM certificate (or public key) and its private key.
type KeyPair struct {
	Cert, Key []byte
}

// Certificates are what kubeadm's certificate phase makes for a cluster
// and Cluster API keeps in the cluster's Secrets. All workload clusters
// here share them, as they share one API server.
type Certificates struct {
	// CA is the cluster CA (<cluster>-ca): it signs the API server's
	// serving certificate and the clients' certificates.
	CA KeyPair
	// EtcdCA is the etcd CA (<cluster>-etcd).
	EtcdCA KeyPair
	// FrontProxyCA is the front proxy CA (<cluster>-proxy).
	FrontProxyCA KeyPair
	// ServiceAccount is the ServiceAccount signing key pair (<cluster>-sa),
	// the public key in Cert.
	ServiceAccount KeyPair
	// APIServerEtcdClient is the API server's client certificate for an
	// external etcd (<cluster>-apiserver-etcd-client), signed by EtcdCA.
	APIServerEtcdClient KeyPair
}

// NewCertificates makes a cluster's certificate authorities and key pairs.
func NewCertificates() (*Certificates, error) {
	var c Certificates
	var err error
	caCert, caKey, err := newCA("kubernetes")
	if err != nil {
		return nil, err
	}
	if c.CA, err = encode(caCert, caKey); err != nil {
		return nil, err
	}
	etcdCert, etcdKey, err := newCA("etcd-ca")
	if err != nil {
		return nil, err
	}
	if c.EtcdCA, err = encode(etcdCert, etcdKey); err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := newCA("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if c.FrontProxyCA, err = encode(proxyCert, proxyKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	c.ServiceAccount = KeyPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}),
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, template(pkix.Name{CommonName: "kube-apiserver-etcd-client"}, false),
		etcdCert, &clientKey.PublicKey, etcdKey)
	if err != nil {
		return nil, fmt.Errorf("signing the etcd client certificate: %w", err)
	}
	clientCert, err := x509.ParseCertificate(clientDER)
	if err != nil {
		return nil, err
	}
	if c.APIServerEtcdClient, err = encode(clientCert, clientKey); err != nil {
		return nil, err
	}
	return &c, nil
}

func template(subject pkix.Name, ca bool) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	t := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if ca {
		t.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
		t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		t.ExtKeyUsage = nil
		t.BasicConstraintsValid = true
		t.IsCA = true
	}
	return t
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := template(pkix.Name{CommonName: name}, true)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func encode(cert *x509.Certificate, key *ecdsa.PrivateKey) (KeyPair, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
	}, nil
}
