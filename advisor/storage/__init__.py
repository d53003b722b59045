"""Where studies live: storage URLs, checks before opening, and cross-process locks.

- ``urls``: the storage URL (default SQLite in ``$ADVISOR_HOME``) and opening it;
- ``checks``: one-line errors for a bad, unreadable or unreachable storage;
- ``locks``: file locks per storage, and writes that Ctrl-C cannot cut in half.
"""
