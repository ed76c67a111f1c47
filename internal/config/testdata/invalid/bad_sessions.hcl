sessions {
  idle_ttl_minutes = 0
  max_per_realm    = -1
}
