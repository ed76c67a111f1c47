plugin_dir = "plugins"
lissen     = "127.0.0.1:7078"
bogus      = 1
