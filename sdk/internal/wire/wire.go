// Package wire holds what both ends of the plugin connection must agree on
// (the handshake, message limits, the plugin-set names, the error codes)
// and the one bridge the host side needs into the SDK's server: both
// package sdk and package sdk/host import it, and it imports neither.
package wire

import (
	"errors"
	"fmt"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// ProtocolVersion is the plugin protocol major version (memhost.plugin.v1).
const ProtocolVersion = 1

// MetaPlugin is the plugin-set entry that serves the Plugin service (Info
// and Configure); every binary serves it, whatever its kinds. Each kind is
// served under its kind name.
const MetaPlugin = "plugin"

// ChunkRows bounds the rows of one streamed Manifest or Select message.
const ChunkRows = 500

// Record limits that size MaxMessageBytes; package sdk asserts in a test
// that they match its own constants.
const (
	maxBatch     = 1000
	maxBodyBytes = 64 << 10
	maxTextBytes = 200 + 400 + 32*64
)

// MaxMessageBytes bounds one gRPC message between host and plugin. It fits
// the largest call the record limits allow (a Remember of MaxBatch records
// at every limit, with room for ids, times and framing); gRPC's own 4 MiB
// default would refuse a batch of 64 records with 64 KiB bodies.
const MaxMessageBytes = maxBatch * (maxBodyBytes + maxTextBytes + RecordFramingBytes)

// RecordFramingBytes bounds what a record takes in a message beyond its
// title, description, body and tags: ids, scope, thread, times, hash and
// the protobuf framing of all of them.
const RecordFramingBytes = 1024

// Handshake is the go-plugin handshake every memhost plugin answers. The
// cookie is fixed forever: it only stops a plugin binary from being run by
// hand by mistake, it is not a secret. A func, so nobody can change it.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   "MEMHOST_PLUGIN_COOKIE",
		MagicCookieValue: "5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7",
	}
}

// Flow-control windows are fixed on both sides, which turns off gRPC's
// bandwidth-delay estimation: it answers every burst of data with a ping
// the peer must acknowledge, doubling the reads and writes of each short
// call, to tune a window that a local socket never needs tuned. The
// windows are wide enough that a call's message rarely waits for one.
const (
	streamWindowBytes = 4 << 20
	connWindowBytes   = 8 << 20
)

// streamWorkers is how many goroutines serve calls, each reused from call
// to call. Without them gRPC starts a goroutine per call, whose small
// stack then grows (a copy at each doubling) through the handler's deep
// path, the sqlite provider's recall among them, on every call. A call
// that finds every worker busy still gets a goroutine of its own.
const streamWorkers = 16

// ServerOptions are the plugin side's: the raised message limit, the
// fixed windows and the stream workers.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(streamWindowBytes), grpc.InitialConnWindowSize(connWindowBytes),
		grpc.NumStreamWorkers(streamWorkers)}
}

// DialOptions are the host side's counterparts of ServerOptions.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(callOptions()...),
		grpc.WithInitialWindowSize(streamWindowBytes), grpc.WithInitialConnWindowSize(connWindowBytes)}
}

// callOptions raise it on the host side.
func callOptions() []grpc.CallOption {
	return []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)}
}

// ServeConfigFunc builds the go-plugin serve configuration for a plugin
// value. Package sdk sets it at init, so the host side can serve a plugin
// in-process (sdk/host.ServeInProcess) without the SDK exporting its
// server internals to plugin authors.
var ServeConfigFunc func(p any, logger hclog.Logger, test *plugin.ServeTestConfig) (*plugin.ServeConfig, error)

// SocketDirPrefix names the directory the host makes for each plugin
// process's socket (in the temporary directory, passed to the plugin as
// PLUGIN_UNIX_SOCKET_DIR). The host removes it once the process is gone;
// a plugin whose host died removes it itself, since no one else will.
// Short, because a Unix socket's whole path must fit in about 104 bytes.
const SocketDirPrefix = "mhsock-"

// EnvHostPID names the variable the host starts each plugin with, its own
// pid: a plugin whose host died before the plugin first read its parent
// was re-parented from the start and would see no change of parent.
const EnvHostPID = "MEMHOST_HOST_PID"

// MetadataRequestID is the gRPC metadata key that carries the id of the
// host request a call serves, so a plugin's log lines for the call name it.
const MetadataRequestID = "memhost-request-id"

// Codes pairs each stable error code name (sdk.Code) with its gRPC code,
// in the order a sentinel is looked up.
var Codes = []struct {
	Name string
	GRPC codes.Code
}{
	{"too_large", codes.OutOfRange},
	{"invalid_argument", codes.InvalidArgument},
	{"not_found", codes.NotFound},
	{"conflict", codes.AlreadyExists},
	{"unsupported", codes.Unimplemented},
	{"unavailable", codes.Unavailable},
	{"deadline_exceeded", codes.DeadlineExceeded},
	{"permission_denied", codes.PermissionDenied},
	{"read_only", codes.FailedPrecondition},
	// gRPC answers ResourceExhausted for a message over MaxMessageBytes.
	// Listed after OutOfRange, so too_large still goes out as OutOfRange.
	{"too_large", codes.ResourceExhausted},
}

// A full disk (storage_full) goes out as ResourceExhausted, which gRPC
// itself answers for an oversized message (too_large); this ErrorInfo
// detail tells the two apart.
const (
	ErrorDomain       = "memhost"
	ReasonStorageFull = "STORAGE_FULL"
)

// ValidateToken checks that s is a safe token: 1-max bytes of ASCII
// letters, digits, '-', '_' and '.', not starting with '.'. Such a token can
// name a file or a key anywhere without escaping its directory.
func ValidateToken(s string, max int) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > max {
		return fmt.Errorf("is %d bytes, the limit is %d", len(s), max)
	}
	if s[0] == '.' {
		return fmt.Errorf("%q must not start with '.'", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q may hold only letters, digits, '-', '_' and '.'", s)
		}
	}
	return nil
}

// IsSemver reports whether v looks like MAJOR.MINOR.PATCH with an optional
// pre-release or build suffix.
func IsSemver(v string) bool {
	core := v
	for i, c := range v {
		if c == '-' || c == '+' {
			core = v[:i]
			break
		}
	}
	parts := 0
	digits := 0
	for i := 0; i <= len(core); i++ {
		if i == len(core) || core[i] == '.' {
			if digits == 0 {
				return false
			}
			parts++
			digits = 0
			continue
		}
		if core[i] < '0' || core[i] > '9' {
			return false
		}
		digits++
	}
	return parts == 3
}

// The wire's 0 is "no time", so an instant in the epoch's millisecond
// travels as -1, as a window's end does (RecallQuery.WindowMillis), and
// comes back as the epoch: a record that happened then is not unset.

// ToMillis encodes an instant for the wire.
func ToMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if ms := t.UnixMilli(); ms != 0 {
		return ms
	}
	return -1
}

// FromMillis decodes an instant ToMillis encoded.
func FromMillis(ms int64) time.Time {
	switch ms {
	case 0:
		return time.Time{}
	case -1:
		return time.Unix(0, 0).UTC()
	}
	return time.UnixMilli(ms).UTC()
}
