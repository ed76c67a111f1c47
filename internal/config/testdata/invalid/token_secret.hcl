token "short" {
  secret_env = "MEMHOST_TOKEN_SHORT"
  realms     = ["default"]
}
token "ops" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = []
}
token "again" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default", "default", "no way"]
}
