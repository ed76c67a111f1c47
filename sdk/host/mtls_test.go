package host

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"testing"
)

// TestClientTLSIsP256 checks the host's client certificate against a
// server that, as gRPC on BoringSSL does, takes a client certificate on
// P-256 only, under TLS 1.2 and under TLS 1.3.
func TestClientTLSIsP256(t *testing.T) {
	clientCfg, certPEM, err := clientTLS()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		t.Fatal("PLUGIN_CLIENT_CERT is not PEM")
	}
	clientCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if key, ok := clientCert.PublicKey.(*ecdsa.PublicKey); !ok || key.Curve != elliptic.P256() {
		t.Fatalf("client certificate key %T, want ECDSA P-256", clientCert.PublicKey)
	}
	// The plugin trusts the host's certificate as its CA, and the host
	// trusts the plugin's server certificate (made here as a plugin
	// would, from the same helper).
	serverCfg, _, err := clientTLS()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(clientCert)
	serverLeaf, _ := x509.ParseCertificate(serverCfg.Certificates[0].Certificate[0])
	serverRoots := x509.NewCertPool()
	serverRoots.AddCert(serverLeaf)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			srv := serverCfg.Clone()
			srv.ClientCAs = roots
			srv.MinVersion, srv.MaxVersion = version, version
			srv.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				c, err := x509.ParseCertificate(raw[0])
				if err != nil {
					return err
				}
				if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
					return errors.New("PEER_DID_NOT_RETURN_A_CERTIFICATE")
				}
				return nil
			}
			cli := clientCfg.Clone()
			cli.RootCAs = serverRoots
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			errs := make(chan error, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					errs <- err
					return
				}
				s := tls.Server(conn, srv)
				errs <- s.Handshake()
				s.Close()
			}()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c := tls.Client(conn, cli)
			if err := c.Handshake(); err != nil {
				t.Fatalf("client handshake: %v", err)
			}
			if got := c.ConnectionState().Version; got != version {
				t.Fatalf("negotiated %s", tls.VersionName(got))
			}
			c.Close()
			if err := <-errs; err != nil {
				t.Fatalf("server refused the client certificate: %v", err)
			}
		})
	}
}
