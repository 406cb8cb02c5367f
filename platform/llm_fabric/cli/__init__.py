"""The `fabric` command line: thin click commands that parse, call the core, and print.

Holds one `<topic>_commands` module per area (listed in `main.COMMANDS`, imported on first use),
shared options (`options`) and printing helpers (`output`). May import every other package; nothing
imports it. Errors are raised in the core and shown once, in `main`.
"""
