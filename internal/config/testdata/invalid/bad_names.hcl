default_realm = "my realm"

provider "../escape" { plugin = "sqlite" }
provider ".hidden" { plugin = "sql/ite" }
