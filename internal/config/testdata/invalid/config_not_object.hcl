provider "main" {
  plugin = "sqlite"
  config = "path=memory.db"
}
