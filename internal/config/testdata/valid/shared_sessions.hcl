# Many hosts: session and compaction state in PostgreSQL, one host key.
host_key_env = "MEMHOST_HOST_KEY"

provider "main" {
  plugin = "postgres"
}

session_store {
  kind    = "postgres"
  dsn_env = "MEMHOST_STATE_DSN"
}
