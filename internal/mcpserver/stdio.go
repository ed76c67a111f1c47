package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// invalidLine answers a line that is not one JSON-RPC message.
const invalidLine = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"the line is not a JSON-RPC message: one object per line, with jsonrpc, method and (for a request) an id that is a string or an integer of at most 2^53 - 1"}}` + "\n"

// StdioTransport is the stdio transport of the tools, for memhost mcp
// with and without --addr. The SDK's ends the session, and with it the
// process, on the first line it cannot read (not JSON, a batch, an id of
// another type): a careless client lost its memory tools for good. Such
// a line is answered with an error here and the session goes on.
func StdioTransport() mcp.Transport {
	return linesTransport(os.Stdin, os.Stdout)
}

func linesTransport(in io.ReadCloser, out io.WriteCloser) mcp.Transport {
	w := &lockedWriter{w: out}
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
				if _, derr := jsonrpc.DecodeMessage(trimmed); derr != nil || trimmed[0] != '{' || len(line) > mcp.DefaultMaxLineLength || !exactID(trimmed) {
					w.Write([]byte(invalidLine))
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
