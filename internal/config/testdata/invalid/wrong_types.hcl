listen                = 7077
allow_insecure_listen = "yes"

coordinator {
  max_entries       = "eight"
  recall_timeout_ms = 2.5
  defang_inbound    = 1
}
