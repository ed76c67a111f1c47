# Values the coordinator refuses, each reported at its own line in one pass.
coordinator {
  max_entries          = 500
  turn_budget_bytes    = 70000
  build_budget_bytes   = 4096
  resolver_cache_ms    = -1
  sweep_timeout_ms     = 0
}
