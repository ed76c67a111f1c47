// Command memhost-plugin-postgres serves the PostgreSQL provider to a
// memhost host. It is started by the host, never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/postgres"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(postgres.New()) }
