# Providers served by other processes: one over mutual TLS, with files
# relative to this file, one in plaintext on loopback.
data_dir = "/var/lib/memhost"

provider "shared" {
  address         = "memory.internal:7400"
  tls_cert        = "certs/host.pem"
  tls_key         = "certs/host.key"
  tls_ca          = "/etc/memhost/plugin-ca.pem"
  tls_server_name = "memory-store"
}

provider "local" {
  address = "127.0.0.1:7401"
}

realm "default" {
  provider = "shared"
}

realm "scratch" {
  provider = "local"
}
