supervisor {
  call_timeout_ms   = 0
  health_timeout_ms = -5
}
