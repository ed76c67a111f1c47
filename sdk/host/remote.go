package host

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Remote says where a plugin served by `<plugin> serve --listen` is and
// how to prove the host to it: mutual TLS from the operator's files, or
// no TLS at all on a loopback address.
type Remote struct {
	// Address is host:port.
	Address string
	// CertFile and KeyFile are the host's client certificate and key;
	// CAFile the CA (or the plugin's pinned self-signed certificate) its
	// server certificate must chain to. All PEM; all three or none.
	CertFile, KeyFile, CAFile string
	// ServerName is the name the server certificate must carry (default
	// Address's host).
	ServerName string
}

// TLS reports whether the connection uses mutual TLS.
func (r Remote) TLS() bool { return r.CertFile != "" }

// Check refuses what Dial would: a missing certificate file name, or no
// TLS off loopback.
func (r Remote) Check() error {
	host, _, err := net.SplitHostPort(r.Address)
	if err != nil {
		return fmt.Errorf("address %q: %v: %w", r.Address, err, sdk.ErrInvalid)
	}
	switch n := countSet(r.CertFile, r.KeyFile, r.CAFile); {
	case n == 0 && !wire.IsLoopbackHost(host):
		return fmt.Errorf("address %s is not on loopback and no TLS files are given: a remote plugin off loopback needs mutual TLS: %w", r.Address, sdk.ErrInvalid)
	case n != 0 && n != 3:
		return fmt.Errorf("mutual TLS needs a client certificate, its key and a CA file: %w", sdk.ErrInvalid)
	}
	return nil
}

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// credentials reads the files afresh, so a rotated certificate is used
// from the next connection on.
func (r Remote) credentials() (credentials.TransportCredentials, error) {
	if !r.TLS() {
		return insecure.NewCredentials(), nil
	}
	pair, pool, err := wire.LoadTLS(r.CertFile, r.KeyFile, r.CAFile)
	if err != nil {
		return nil, fmt.Errorf("client %v", err)
	}
	name := r.ServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(r.Address)
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}), nil
}

// Dial connects to a remote plugin and asks its Info, checked as a
// started plugin's is (CheckInfo). The host neither starts nor ends the
// plugin: Kill and Close close the connection only. The plugin configured
// itself when it started (`serve --config`), since hosts share it.
func Dial(ctx context.Context, opts LaunchOptions, r Remote) (*Conn, error) {
	label := fmt.Sprintf("%s (%s)", opts.Name, r.Address)
	if err := r.Check(); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", label, err)
	}
	creds, err := r.credentials()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %v: %w", label, err, sdk.ErrInvalid)
	}
	// No idle mode: an idle channel leaves READY, which watch takes for
	// the plugin gone, and reconnects for nothing.
	cc, err := grpc.NewClient("passthrough:///"+r.Address, append(grpcDialOptions(), grpc.WithTransportCredentials(creds), grpc.WithIdleTimeout(0))...)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %v: %w", label, err, sdk.ErrInvalid)
	}
	rp := &remotePeer{cc: cc}
	c := &Conn{name: opts.Name, peer: rp, rpc: remoteRPC{cc}, meta: pb.NewPluginClient(cc), host: opts.Host, done: make(chan struct{})}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.meta.Info(ictx, &pb.InfoRequest{})
	if err != nil {
		_ = cc.Close()
		hint := ""
		if r.TLS() && status.Code(err) == codes.Unavailable && closedAfterHandshake(err) {
			// Under TLS 1.3 a server that refuses the client certificate
			// just closes the connection after the handshake.
			hint = " (a plugin that does not trust the host's client certificate, tls_cert, closes the connection so)"
		}
		return nil, fmt.Errorf("plugin %s: Info call failed%s: %w", label, hint, fromStatus(ictx, err))
	}
	c.info = infoFromPB(resp)
	if err := CheckInfo(c.info); err != nil {
		_ = cc.Close()
		return nil, fmt.Errorf("plugin %s: refused: %v: %w", label, err, sdk.ErrInvalid)
	}
	go rp.watch()
	return c, nil
}

// closedAfterHandshake tells a connection the server dropped after the
// TLS handshake (reset, broken pipe, EOF or an alert, by timing) from one
// that never got there: a dial that failed, or a server certificate this
// host refused, which the error already says.
func closedAfterHandshake(err error) bool {
	msg := err.Error()
	return !strings.Contains(msg, "dial tcp") && !strings.Contains(msg, "authentication handshake failed")
}

// remotePeer is a remote plugin's connection: closing it is all the host
// may do.
type remotePeer struct {
	cc     *grpc.ClientConn
	closed atomic.Bool
	// lost: the connection left READY. gRPC dials again by itself, and
	// the process that answers may be another one (a restart, with
	// another model or other capabilities), whose Info this Conn never
	// read; so the peer counts as exited, and the supervisor connects
	// anew and reads it.
	lost atomic.Bool
}

// watch sets lost once the connection leaves READY (closing it does too).
// It waits from READY only: reading the state again after a change could
// find it READY once more, gRPC having reconnected (to a restarted
// process) within the moment between.
func (p *remotePeer) watch() {
	if p.cc.GetState() != connectivity.Ready || p.cc.WaitForStateChange(context.Background(), connectivity.Ready) {
		p.lost.Store(true)
	}
}

func (p *remotePeer) Exited() bool { return p.closed.Load() || p.lost.Load() }
func (p *remotePeer) Pid() int     { return 0 }
func (p *remotePeer) Kill() {
	p.closed.Store(true)
	_ = p.cc.Close()
}

// remoteRPC is go-plugin's client protocol over a connection the host
// dialled itself, so Conn serves a remote plugin as it does a started one.
type remoteRPC struct{ cc *grpc.ClientConn }

func (r remoteRPC) Close() error { return r.cc.Close() }

func (r remoteRPC) Dispense(name string) (any, error) {
	return (&clientPlugin{name: name}).GRPCClient(context.Background(), nil, r.cc)
}

// Ping asks the health service, as go-plugin asks a started plugin's.
func (r remoteRPC) Ping() error {
	resp, err := healthpb.NewHealthClient(r.cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: plugin.GRPCServiceName})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health status %s", resp.Status)
	}
	return nil
}
