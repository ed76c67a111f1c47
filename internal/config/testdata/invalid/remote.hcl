provider "both" {
  plugin  = "sqlite"
  address = "127.0.0.1:7400"
}

provider "configured" {
  address = "127.0.0.1:7401"
  config  = { path = "x.db" }
}

provider "plaintext" {
  address = "10.0.0.5:7402"
}

provider "half" {
  address  = "10.0.0.5:7403"
  tls_cert = "host.pem"
}

provider "noport" {
  address = "10.0.0.5"
}

realm "default" {
  provider = "both"
}
