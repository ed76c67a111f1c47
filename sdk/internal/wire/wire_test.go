package wire

import "testing"

// gRPC ignores a window below 64 KiB and keeps estimating the
// bandwidth-delay product, pinging on every call, which the fixed windows
// are there to stop.
func TestWindowsAreFixed(t *testing.T) {
	const grpcMinWindow = 64 << 10
	for name, w := range map[string]int{"stream": streamWindowBytes, "connection": connWindowBytes} {
		if w < grpcMinWindow {
			t.Errorf("%s window %d is below gRPC's minimum %d: gRPC would ignore it", name, w, grpcMinWindow)
		}
	}
	if connWindowBytes < streamWindowBytes {
		t.Errorf("connection window %d is narrower than a stream's %d", connWindowBytes, streamWindowBytes)
	}
	if got := len(ServerOptions()); got != 5 {
		t.Errorf("ServerOptions: %d options, want the message limits, both windows and the stream workers", got)
	}
}
