coordinator {
  max_entries = 4
}

coordinator {
  max_entries = 5
}

server {}
server {}
