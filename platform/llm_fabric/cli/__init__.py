"""The `fabric` command line: thin click commands that parse, call the core, and print."""
