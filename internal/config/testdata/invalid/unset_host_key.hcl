host_key_env = "MEMHOST_HOST_KEY_UNSET"
