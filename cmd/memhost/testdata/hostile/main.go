// Command hostile is a test-only provider plugin that writes what no
// well-behaved plugin would: JSON log lines of every wrong shape, forged
// host log lines, an endless line and invalid UTF-8 on stderr, before the
// handshake and after it. MEMHOST_TEST_HOSTILE picks a failure instead:
// "crash" dies before the handshake as a Python plugin missing a module
// would, "stdout" writes to stdout instead of the handshake, and
// "boringssl" refuses any client certificate but P-256, as gRPC on
// BoringSSL does under TLS 1.3.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

type hostile struct{}

func (hostile) Info() sdk.Info {
	return sdk.Info{Name: "hostile", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{sdk.ProtocolVersion}}
}

func (hostile) Configure(context.Context, json.RawMessage) error {
	writeHostile("post")
	return nil
}

func (hostile) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	writeHostile("call")
	return []sdk.Hit{}, nil
}

// writeHostile writes every bad line once, each message tagged with when.
func writeHostile(when string) {
	lines := []string{
		`{"@level":"info","@message":42,"@timestamp":"2026-12-01T00:00:00.000000Z"}`,
		`{"@level":7,"@message":"` + when + ` level is a number"}`,
		`{"@level":"warn","@message":"` + when + ` node millis","@timestamp":"2026-12-01T00:00:00.123Z"}`,
		`{"@level":"error","@message":"` + when + ` no fraction","@timestamp":"2026-12-01T00:00:00Z"}`,
		`{"@level":["warn"],"@message":{"nested":true},"@timestamp":12}`,
		`{"@level":"off","@message":"` + when + ` level off"}`,
		`{"@level":"info","@message":"` + when + ` forged\n2026-12-01T00:00:00.000Z [ERROR] memhost: FORGED host line"}`,
		`{"@level":"info","@message":"` + when + ` many keys",` + manyKeys() + `}`,
		`[1,2,3]`, `null`, `"just a string"`, `{"@message":`, `{}`,
		"\xff\xfe " + when + " invalid utf-8",
		when + " long " + strings.Repeat("x", 300<<10),
		`{"@level":"info","@message":"` + when + ` survivor"}`,
	}
	for _, l := range lines {
		fmt.Fprintln(os.Stderr, l)
	}
}

func manyKeys() string {
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%03d":%d`, i, i)
	}
	return strings.Join(keys, ",")
}

// requireP256 refuses the host's client certificate unless its key is on
// P-256, before the handshake, with the error gRPC on BoringSSL logs.
func requireP256() {
	block, _ := pem.Decode([]byte(os.Getenv("PLUGIN_CLIENT_CERT")))
	if block == nil {
		fail("no client certificate in PLUGIN_CLIENT_CERT")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		fail("client certificate: " + err.Error())
	}
	if key, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || key.Curve != elliptic.P256() {
		fail("Handshake failed with fatal error SSL_ERROR_SSL: PEER_DID_NOT_RETURN_A_CERTIFICATE (client certificate curve refused)")
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}

func main() {
	switch os.Getenv("MEMHOST_TEST_HOSTILE") {
	case "crash":
		fmt.Fprintln(os.Stderr, "Traceback (most recent call last):")
		fmt.Fprintln(os.Stderr, `  File "/opt/plugin/main.py", line 3, in <module>`)
		fmt.Fprintln(os.Stderr, "    import grpc")
		fmt.Fprintln(os.Stderr, "ModuleNotFoundError: No module named 'grpc'")
		os.Exit(1)
	case "stdout":
		fmt.Println("hello from a plugin that prints")
		time.Sleep(time.Minute)
	case "boringssl":
		requireP256()
	}
	writeHostile("pre")
	sdk.Serve(hostile{})
}
