# The DESIGN Appendix B example, with every optional block.
listen     = "127.0.0.1:7077"
plugin_dir = "./bin/plugins"
data_dir   = "./memhost-data"
log_format = "text"
log_level  = "debug"

# Plugin instances: a kind, an instance name, the plugin (manifest name) and its config.
provider "main" {
  plugin = "sqlite"
  config = { path = "memory.db" }
}
provider "fulltext" {
  plugin = "bleve"
  config = { dir = "bleve" }
}
provider "notes" {
  plugin = "markdown"
  config = { root = "md" }
}
selector "rerank" { plugin = "lexical" }
compactor "summary" {
  plugin = "template"
  config = { max_bytes = 4096 }
}
mob_resolver "teams" {
  plugin = "static"
  config = { file = "bindings.json" }
}
operator_resolver "oncall" { plugin = "static" }

realm "default" { provider = "main" }
realm "acme" { provider = "fulltext" }
realm "notes" { provider = "notes" }

coordinator {
  per_turn_injection    = "budgeted"
  selection             = "contextual"
  max_entries           = 8
  recall_timeout_ms     = 500
  recall_failure_policy = "skip"
  defang_inbound        = true
  instruction_header    = "Agent memory"
  operator_scope        = "provisional"
  selector              = "rerank"
  mob_resolver          = "teams"
  operator_resolver     = "oncall"
  compactor             = "summary"
  session_cache_size    = 5000
  turn_budget_bytes     = 16384
  session_budget_bytes  = 49152
  build_budget_bytes    = 20480
}

server {
  max_body_bytes      = 2097152
  read_timeout_ms     = 15000
  shutdown_timeout_ms = 5000
}

token "ops" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default", "acme"]
}
token "ci" {
  secret_env = "MEMHOST_TOKEN_CI"
  realms     = ["notes"]
}
