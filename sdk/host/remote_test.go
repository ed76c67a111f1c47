package host

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// selfSigned writes a self-signed P-256 certificate for 127.0.0.1 and its
// key under dir, and answers the files and the parsed pair.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// infoServer answers a fixed Info.
type infoServer struct {
	pb.UnimplementedPluginServer
	info *pb.InfoResponse
}

func (s *infoServer) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	return s.info, nil
}

// serveInfo serves info over mutual TLS with serverPair, trusting only
// the client certificate in clientCA, and answers its address.
func serveInfo(t *testing.T, info *pb.InfoResponse, serverPair tls.Certificate, clientCA string) string {
	t.Helper()
	data, err := os.ReadFile(clientCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
	})))
	pb.RegisterPluginServer(srv, &infoServer{info: info})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestDial: a remote plugin is checked as a started one is (its Info),
// and each way of failing says which: a certificate the plugin refuses,
// one of the plugin's the host refuses, nothing listening, and an Info
// without this host's protocol.
func TestDial(t *testing.T) {
	dir := t.TempDir()
	serverCert, _, serverPair := selfSigned(t, dir, "plugin")
	hostCert, hostKey, _ := selfSigned(t, dir, "host")
	strangerCert, strangerKey, _ := selfSigned(t, dir, "stranger")
	good := &pb.InfoResponse{Name: "remote", Version: "1.0.0", Kinds: []string{"provider"}, ProtocolVersions: []int32{1}}
	addr := serveInfo(t, good, serverPair, hostCert)
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	newer := serveInfo(t, &pb.InfoResponse{Name: "remote", Version: "2.0.0", Kinds: []string{"provider"}, ProtocolVersions: []int32{2}}, serverPair, hostCert)

	conn, err := Dial(context.Background(), LaunchOptions{Name: "shared"}, Remote{Address: addr, CertFile: hostCert, KeyFile: hostKey, CAFile: serverCert})
	if err != nil {
		t.Fatalf("Dial with trusted certificates: %v", err)
	}
	if conn.Info().Name != "remote" || conn.Pid() != 0 || conn.Exited() {
		t.Errorf("conn = info %+v, pid %d, exited %v", conn.Info(), conn.Pid(), conn.Exited())
	}
	conn.Close()
	if !conn.Exited() {
		t.Error("a closed remote connection does not report it")
	}

	for _, tc := range []struct {
		name     string
		remote   Remote
		want     string
		wantHint bool
		is       error
	}{
		{"the plugin refuses the host", Remote{Address: addr, CertFile: strangerCert, KeyFile: strangerKey, CAFile: serverCert}, "Info call failed", true, sdk.ErrUnavailable},
		{"the host refuses the plugin", Remote{Address: addr, CertFile: hostCert, KeyFile: hostKey, CAFile: strangerCert}, "certificate", false, sdk.ErrUnavailable},
		{"nothing listens", Remote{Address: closed, CertFile: hostCert, KeyFile: hostKey, CAFile: serverCert}, "connection refused", false, sdk.ErrUnavailable},
		{"another protocol", Remote{Address: newer, CertFile: hostCert, KeyFile: hostKey, CAFile: serverCert}, "does not include protocol 1", false, sdk.ErrInvalid},
		{"plaintext off loopback", Remote{Address: "10.0.0.1:7400"}, "needs mutual TLS", false, sdk.ErrInvalid},
		{"a missing key file", Remote{Address: addr, CertFile: hostCert, KeyFile: filepath.Join(dir, "absent.key"), CAFile: serverCert}, "client certificate", false, sdk.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, LaunchOptions{Name: "shared", StartTimeout: 5 * time.Second}, tc.remote)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Fatalf("Dial = %v, want an error saying %q that is %v", err, tc.want, tc.is)
			}
			if hint := strings.Contains(err.Error(), "does not trust the host's client certificate"); hint != tc.wantHint {
				t.Errorf("Dial = %v: the client-certificate hint shown %v, want %v", err, hint, tc.wantHint)
			}
		})
	}
}
