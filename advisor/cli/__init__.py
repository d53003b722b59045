"""The `advisor` command line: one small module per command, loaded only when it runs."""
