package sdk

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// remoteRequested reports whether the plugin was started as
// `<plugin> serve ...`: a standalone server that hosts dial.
func remoteRequested() bool { return len(os.Args) > 1 && os.Args[1] == "serve" }

// remoteOptions are the flags of `<plugin> serve`.
type remoteOptions struct {
	listen   string
	config   string // a JSON file with the instance's configuration
	cert     string // the server's certificate and key (PEM)
	key      string
	clientCA string // the CA (or pinned self-signed certificate) a host's client certificate must chain to
}

func parseRemoteFlags(args []string, out io.Writer) (remoteOptions, error) {
	var o remoteOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.listen, "listen", "", "`host:port` to serve on (required)")
	fs.StringVar(&o.config, "config", "", "JSON `file` with the instance's configuration (default {})")
	fs.StringVar(&o.cert, "tls-cert", "", "server certificate `file` (PEM)")
	fs.StringVar(&o.key, "tls-key", "", "server private key `file` (PEM)")
	fs.StringVar(&o.clientCA, "tls-client-ca", "", "`file` of CA certificates a host's client certificate must chain to (PEM); a self-signed host certificate pins that host")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, o.check()
}

// errPlaintextOffLoopback refuses a listen address other hosts can reach
// without mutual TLS: anyone there could read and write the store.
var errPlaintextOffLoopback = errors.New("refusing to serve without TLS on an address other machines can reach")

func (o remoteOptions) check() error {
	if o.listen == "" {
		return errors.New("--listen is required")
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %v", o.listen, err)
	}
	set := 0
	for _, f := range []string{o.cert, o.key, o.clientCA} {
		if f != "" {
			set++
		}
	}
	switch {
	case set == 0 && !wire.IsLoopbackHost(host):
		return fmt.Errorf("--listen %s: %w; give --tls-cert, --tls-key and --tls-client-ca, or listen on 127.0.0.1", o.listen, errPlaintextOffLoopback)
	case set != 0 && set != 3:
		return errors.New("mutual TLS needs all of --tls-cert, --tls-key and --tls-client-ca")
	}
	return nil
}

// tlsConfig loads the operator's files: the server's pair and the client
// CAs, client certificates required.
func (o remoteOptions) tlsConfig() (*tls.Config, error) {
	if o.cert == "" {
		return nil, nil
	}
	pair, pool, err := wire.LoadTLS(o.cert, o.key, o.clientCA)
	if err != nil {
		return nil, fmt.Errorf("mutual TLS: %v", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func (o remoteOptions) configJSON() (json.RawMessage, error) {
	if o.config == "" {
		return json.RawMessage("{}"), nil
	}
	data, err := os.ReadFile(o.config)
	if err != nil {
		return nil, fmt.Errorf("--config: %v", err)
	}
	if !json.Valid(data) || !strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		return nil, fmt.Errorf("--config %s: not a JSON object", o.config)
	}
	return data, nil
}

// serveRemote runs p as a standalone server that hosts dial (their
// config's address): configured once here, from --config, since several
// hosts may share it; it serves until SIGINT or SIGTERM. No host can shut
// it down: the controller service go-plugin's hosts call is not served.
func serveRemote(p Plugin, args []string) error {
	o, err := parseRemoteFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	tlsConf, err := o.tlsConfig()
	if err != nil {
		return err
	}
	raw, err := o.configJSON()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer closePlugin(p)
	if err := p.Configure(ctx, raw); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	opts := serverOptions()
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	srv := grpc.NewServer(opts...)
	for name, entry := range servedPluginSet(p) {
		if err := entry.(plugin.GRPCPlugin).GRPCServer(nil, srv); err != nil {
			return fmt.Errorf("serve %s: %w", name, err)
		}
	}
	// The health service hosts ping, under go-plugin's service name, as
	// they ping a plugin they started.
	hs := health.NewServer()
	hs.SetServingStatus(plugin.GRPCServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	Logger().Info("serving", "address", ln.Addr().String(), "tls", tlsConf != nil)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	Logger().Info("shutting down")
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	return nil
}
