# An empty file: every default, including the sqlite provider "main".
