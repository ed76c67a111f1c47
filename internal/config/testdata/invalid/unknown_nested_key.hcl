provider "main" {
  plugin = "sqlite"
  path   = "memory.db"
}

coordinator {
  max_entry = 8
}
