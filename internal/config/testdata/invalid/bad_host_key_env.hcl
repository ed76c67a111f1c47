host_key_env = "not a name"

sessions { bogus = 1 }
sessions { bogus = 1 }
