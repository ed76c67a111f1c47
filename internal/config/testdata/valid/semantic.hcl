# Semantic recall: the default realm is embedded by a remote endpoint,
# which needs more than the default 250 ms per query; "acme" keeps the
# default. Realms without a block share the default realm's settings.
provider "main" {
  plugin = "sqlite"
}

embedder "remote" {
  plugin = "openai"
  config = { base_url = "https://api.openai.com/v1", model = "text-embedding-3-small", dimensions = 256 }
}

realm "default" {
  provider               = "main"
  embedder               = "remote"
  semantic_weight        = 0.3
  query_embed_timeout_ms = 2000
}

realm "acme" {
  provider = "main"
  embedder = "remote"
}
