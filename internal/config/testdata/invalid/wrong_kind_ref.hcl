provider "main" { plugin = "sqlite" }
compactor "summary" { plugin = "template" }

coordinator {
  selector  = "main"
  compactor = "nope"
}
