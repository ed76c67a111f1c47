# Realms choose their compaction archive: acme keeps 30 days and 500
# episodes a conversation, quiet none; the default realm says nothing.
provider "main" {
  plugin = "sqlite"
}

realm "default" { provider = "main" }

realm "acme" {
  provider             = "main"
  archive_max_age_days = 30
  archive_max_records  = 500
}

realm "quiet" {
  provider = "main"
  archive  = false
}
