# Every interface and no token: refused without allow_insecure_listen.
listen = ":7077"
