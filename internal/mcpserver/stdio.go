package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk/strictjson"
)

// invalidLine answers a line that is not one JSON-RPC message.
const invalidLine = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"the line is not a JSON-RPC message: one object per line, with jsonrpc, method and (for a request) an id that is a string or an integer of at most 2^53 - 1"}}` + "\n"

// StdioTransport is the stdio transport of the tools, for memhost mcp
// with and without --addr. The SDK's ends the session, and with it the
// process, on the first line it cannot read (not JSON, a batch, an id of
// another type): a careless client lost its memory tools for good. Such
// a line is answered with an error here and the session goes on. Every
// JSON-RPC error it answers is rendered by c's rules (RenderError), as
// /mcp renders them: the SDK refuses an unknown method or unreadable
// params before any middleware runs, quoting what the client sent.
func StdioTransport(c *coordinator.Coordinator) mcp.Transport {
	return renderedTransport{linesTransport(os.Stdin, os.Stdout, c), c}
}

// renderedTransport renders the errors its connection answers.
type renderedTransport struct {
	mcp.Transport
	c *coordinator.Coordinator
}

func (t renderedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return renderedConn{conn, t.c}, nil
}

// renderedConn writes a response's error rendered.
type renderedConn struct {
	mcp.Connection
	c *coordinator.Coordinator
}

func (r renderedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error != nil {
		// As the SDK writes it: the message of the whole error, the code
		// (and data) of the protocol error it wraps.
		wire := &jsonrpc.Error{Message: resp.Error.Error()}
		var inner *jsonrpc.Error
		if errors.As(resp.Error, &inner) {
			wire.Code = inner.Code
			if error(inner) == resp.Error {
				wire.Data = inner.Data
			}
		}
		// A plain error is written with code 0, which JSON-RPC does not
		// define: the SDK's refusals of the client's sequence (a call
		// before initialize, a second initialize) are invalid requests;
		// any other (a handler's failure: the proxy's server unreachable)
		// is the server's, an internal error.
		coded := wire.Code == 0
		if coded {
			wire.Code = jsonrpc.CodeInternalError
			if clientSequenceRefusal(wire.Message) {
				wire.Code = jsonrpc.CodeInvalidRequest
			}
		}
		if rendered := RenderError(r.c, wire); rendered != wire || coded {
			out := *resp
			out.Error = rendered
			msg = &out
		}
	}
	return r.Connection.Write(ctx, msg)
}

// clientSequenceRefusal reports whether msg is one of the SDK's plain
// errors refusing a request out of the session's order, or an initialize
// without params (TestStdioRefusalsHaveACode holds them to the SDK's).
func clientSequenceRefusal(msg string) bool {
	return strings.Contains(msg, "is invalid during session initialization") ||
		strings.HasSuffix(msg, `duplicate "initialize" received`) || strings.HasSuffix(msg, `missing required "params"`)
}

// linesTransport reads one message a line from in and writes to out,
// answering itself the lines the SDK must not see (rendered by c's
// rules, as the SDK's answers are by renderedTransport; nil for none).
func linesTransport(in io.ReadCloser, out io.WriteCloser, c *coordinator.Coordinator) mcp.Transport {
	w := &lockedWriter{w: out}
	// refuse answers req itself; its message may quote the client's
	// member names, which reach the model.
	refuse := func(req *jsonrpc.Request, code int64, msg string) {
		answer, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: RenderError(c, &jsonrpc.Error{Code: code, Message: msg})})
		w.Write(append(answer, '\n'))
	}
	pr, pw := io.Pipe()
	go func() {
		lines := bufio.NewReader(in)
		for {
			// A line is read to its end, but no more of it kept than the
			// SDK's bound: a longer one is refused, not buffered whole.
			var line []byte
			var err error
			for {
				chunk, cerr := lines.ReadSlice('\n')
				if len(line) <= mcp.DefaultMaxLineLength {
					line = append(line, chunk...)
				}
				if err = cerr; err != bufio.ErrBufferFull {
					break
				}
			}
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				msg, derr := jsonrpc.DecodeMessage(trimmed)
				if derr != nil || trimmed[0] != '{' || len(line) > mcp.DefaultMaxLineLength || !exactID(trimmed) {
					w.Write([]byte(invalidLine))
				} else if serr := strictjson.Decode(trimmed, new(any)); serr != nil {
					// A repeated member (two names, two params) the SDK
					// reads as its last, where /mcp refuses it: a gateway
					// reading the first would pass one call and run another.
					if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
						refuse(req, jsonrpc.CodeInvalidRequest, "the line is not one JSON-RPC message: "+serr.Error())
					}
				} else if req, ok := msg.(*jsonrpc.Request); ok && !objectParams(req.Params) {
					// The SDK's refusal names its Go types and quotes
					// the params as sent; a notification is dropped.
					if req.IsCall() {
						refuse(req, jsonrpc.CodeInvalidParams, "params: must be an object")
					}
				} else if perr := checkRequest(msg); perr != nil {
					// The SDK's refusal names its Go types and quotes the
					// params whole.
					if req := msg.(*jsonrpc.Request); req.IsCall() {
						refuse(req, jsonrpc.CodeInvalidParams, perr.Error())
					}
				} else if _, werr := pw.Write(append(trimmed, '\n')); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return &mcp.IOTransport{Reader: readCloser{pr, in}, Writer: w}
}

// MaxExactID is the largest integer every JSON reader holds exactly
// (2^53 - 1): the SDK reads a number id through a float64, so an id
// beyond it is answered as another, on stdio and over HTTP alike.
const MaxExactID = 1<<53 - 1

// exactID reports whether message's id, when a number, is an integer
// within ±MaxExactID: the SDK reads a number id through a float64 and
// would answer a larger one under another id, which the client never
// matches.
func exactID(message []byte) bool {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(message, &m) != nil || len(m.ID) == 0 || m.ID[0] == '"' || string(m.ID) == "null" {
		return true
	}
	n, err := strconv.ParseInt(string(m.ID), 10, 64)
	return err == nil && n >= -MaxExactID && n <= MaxExactID
}

// checkRequest refuses a request's params as CheckParams does; nil for
// any other message.
func checkRequest(msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok {
		return CheckParams(req.Method, req.Params)
	}
	return nil
}

// objectParams reports whether params are absent, null or an object, the
// only params an MCP method takes.
func objectParams(params json.RawMessage) bool {
	params = bytes.TrimSpace(params)
	return len(params) == 0 || params[0] == '{' || string(params) == "null"
}

// readCloser reads the filtered lines and closes the input under them.
type readCloser struct {
	*io.PipeReader
	in io.Closer
}

func (r readCloser) Close() error {
	r.PipeReader.Close()
	return r.in.Close()
}

// lockedWriter keeps an error line from landing inside an answer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }
