session_store {
  kind   = "redis"
  schema = "Not-A-Schema"
}
