# A shared store without a shared host key loads, with a warning.
provider "main" {
  plugin = "postgres"
}

session_store {
  kind    = "postgres"
  dsn_env = "MEMHOST_STATE_DSN"
  schema  = "tenant_a_state"
}
