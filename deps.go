//go:build deps

// Package memhost pins dependencies that later packages import, so that
// parallel work never races on go.mod. Removed once each has a real user.
package memhost

import (
	_ "github.com/blevesearch/bleve/v2"
	_ "github.com/hashicorp/hcl/v2/gohcl"
	_ "github.com/hashicorp/hcl/v2/hclsimple"
	_ "github.com/hashicorp/hcl/v2/hclsyntax"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/zclconf/go-cty/cty"
	_ "github.com/zclconf/go-cty/cty/json"
	_ "golang.org/x/text/unicode/norm"
)
