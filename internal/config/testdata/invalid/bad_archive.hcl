provider "main" {
  plugin = "sqlite"
}

realm "default" {
  provider             = "main"
  archive_max_age_days = -1
  archive_max_records  = -5
}

realm "acme" {
  provider             = "main"
  archive_max_age_days = 40000
}
