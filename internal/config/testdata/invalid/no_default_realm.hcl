provider "main" { plugin = "sqlite" }
provider "fulltext" { plugin = "bleve" }

realm "acme" { provider = "fulltext" }
