package host

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// clientTLS makes the host's side of a plugin connection's mutual TLS: a
// fresh self-signed client certificate, handed to the plugin in
// PLUGIN_CLIENT_CERT, and the TLS configuration go-plugin completes with
// the server certificate from the handshake line.
//
// The host makes the certificate itself instead of letting go-plugin's
// AutoMTLS make it: AutoMTLS uses P-521, which gRPC built on BoringSSL
// (the grpcio wheels Python plugins run on, and other wrapped runtimes)
// refuses for a client certificate under TLS 1.3. P-256 works everywhere.
func clientTLS() (*tls.Config, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("client certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, "", fmt.Errorf("client certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"memhost"}},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Minute),
		// The connection lives as long as the plugin process: a
		// certificate that expired under a long-running host would cut it.
		NotAfter:              now.Add(30 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		// The plugin's server trusts this certificate as its only CA.
		IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, "", fmt.Errorf("client certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}, string(certPEM), nil
}
