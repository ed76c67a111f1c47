# Durable session settings and a host key shared by several hosts.
host_key_env = "MEMHOST_HOST_KEY"

sessions {
  idle_ttl_minutes = 90
  max_per_realm    = 500
}
