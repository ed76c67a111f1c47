provider "main" {}

realm "default" {}

token "ops" {}
