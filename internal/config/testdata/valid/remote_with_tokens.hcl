# A non-loopback address is fine once a token guards it.
listen = "[2001:db8::1]:443"

token "agents" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default"]
}
