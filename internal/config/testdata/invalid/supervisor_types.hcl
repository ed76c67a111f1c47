supervisor {
  kill_grace_ms = "soon"
}
supervisor {
}
