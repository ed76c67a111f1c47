provider "main" { plugin = "sqlite" }

storage "main" {
  plugin = "sqlite"
}
