"""SIGTERM delivered again until Python's handler has run (see ``_sigterm.c``)."""


def arm() -> bool: ...
