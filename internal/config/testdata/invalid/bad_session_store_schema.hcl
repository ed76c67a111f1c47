session_store {
  kind    = "postgres"
  dsn_env = "MEMHOST_STATE_DSN"
  schema  = "Not-A-Schema"
}
