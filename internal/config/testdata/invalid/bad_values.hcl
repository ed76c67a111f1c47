log_format = "yaml"
log_level  = "verbose"

coordinator {
  per_turn_injection    = "always"
  selection             = "sometimes"
  recall_failure_policy = "retry"
  operator_scope        = "on"
  max_entries           = 0
  recall_timeout_ms     = -1
  session_cache_size    = 0
  turn_budget_bytes     = 100
  instruction_header    = "two\nlines"
}

server {
  max_body_bytes = 0
}
