"""The error every command turns into exit 2 with its one-line message."""


class UsageError(Exception):
    """Bad options or environment: the CLIs exit 2 with this message."""
