# Plugin config may hold any literal: nested objects, lists, numbers,
# heredocs, escapes and non-ASCII text; all of it reaches the plugin as JSON.
provider "main" {
  plugin = "sqlite"
  config = {
    path      = "dbs/memory.db"
    "odd key" = "value with \"quotes\" and $${not_interpolated}"
    nested = {
      list    = [1, -2, 3.25, 1e3, true, null, "x"]
      empty   = {}
      nothing = []
    }
    text = <<-EOT
      first line
      second line: naïve café 日本語
    EOT
    huge = 123456789012345678901234567890
  }
}
