//go:build !unix

package sdk

// stdoutToStderr leaves descriptor 1 as it is where it cannot be moved.
func stdoutToStderr() {}
