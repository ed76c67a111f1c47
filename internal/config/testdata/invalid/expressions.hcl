listen   = "127.0.0.1:${7000 + 77}"
data_dir = var.home

provider "main" {
  plugin = "sqlite"
  config = { path = upper("memory.db"), size = 1 + 1 }
}
