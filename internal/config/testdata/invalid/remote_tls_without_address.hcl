provider "local" {
  plugin = "sqlite"
  tls_ca = "ca.pem"
}
