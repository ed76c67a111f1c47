// Command memhost-plugin-static serves the static operator and mob
// resolvers to a memhost host. It is started by the host, never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/static"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(static.New()) }
