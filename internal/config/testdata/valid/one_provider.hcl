# A single provider serves the default realm without a realm block.
default_realm = "acme"
data_dir      = "/var/lib/memhost"
log_format    = "json"

provider "fts" {
  plugin = "bleve"
  config = { dir = "index" }
}
