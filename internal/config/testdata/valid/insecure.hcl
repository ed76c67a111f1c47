# Every interface, no tokens: allowed only because the file says so.
listen                = "0.0.0.0:7077"
allow_insecure_listen = true
