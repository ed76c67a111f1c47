# A misspelt key does not hide the values' problems: every problem at once,
# and none twice (the token's secret and realms, the realm's provider and the
# turn budget are each reported once, at the line the file got wrong).
lissen = "127.0.0.1:7078"
plugin_dir = "plugins"

realm "default" { provider = 5 }

coordinator {
  compactor            = "nope"
  max_entries          = 500
  turn_budget_bytes    = "big"
  session_budget_bytes = 1024
}

token "ops" {
  secrt_env = "MEMHOST_TEST_TOKEN_OPS"
  realms    = "default"
}
