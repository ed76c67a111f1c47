provider "main" { plugin = "sqlite" }
selector "main" { plugin = "lexical" }

realm "default" { provider = "main" }
realm "default" { provider = "main" }

token "ops" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default"]
}
token "ops" {
  secret_env = "MEMHOST_TOKEN_CI"
  realms     = ["default"]
}
