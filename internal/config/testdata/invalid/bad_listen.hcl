listen = "localhost"
