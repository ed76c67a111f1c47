provider "main" { plugin = "sqlite" }

realm "default" { provider = "main" }
realm "acme" { provider = "fulltext" }
