listen = "127.0.0.1:7077"
provider "main" {
  plugin = "sqlÿite"
}
