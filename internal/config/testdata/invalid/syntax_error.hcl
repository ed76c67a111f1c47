provider "main" {
  plugin = "sqlite"

realm "default" { provider = "main" }
