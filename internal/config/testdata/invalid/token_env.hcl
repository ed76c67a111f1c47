token "missing" {
  secret_env = "MEMHOST_TOKEN_UNSET"
  realms     = ["default"]
}
token "empty" {
  secret_env = "MEMHOST_TOKEN_EMPTY"
  realms     = ["default"]
}
token "bad-env" {
  secret_env = "1NOT-A-NAME"
  realms     = ["default"]
}
