provider { plugin = "sqlite" }
coordinator "main" {}
