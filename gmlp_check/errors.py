"""The error every command turns into exit 2 with its one-line message, and the one-line text
of any exception a report quotes.

Nothing here imports anything: the Transformer Engine adapters use ``short`` too, and a written
reproduction embeds what they import (repro_embed.py), so this module must stay a leaf."""


class UsageError(Exception):
    """Bad options or environment: the CLIs exit 2 with this message."""


_DETAIL_CHARS = 300


def short(exc: BaseException) -> str:
    """``Type: first line`` of an exception, cut to a readable length: details of a failure
    must not dump whole arrays into a report line. An exception whose ``__str__`` itself
    raises (user code) is still reported, as its type."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:
        lines = ["<exception str() failed>"]
    text = lines[0] if lines else ""
    if len(text) > _DETAIL_CHARS:
        text = text[: _DETAIL_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def not_an_exception(exc: BaseException) -> str:
    """What user code did when it raised ``exc``, a BaseException that is not an Exception
    (SystemExit, GeneratorExit, a class of its own), in words that follow "the factory":
    such an exit is no verdict on the contract, so the CLIs stop with it as a usage error.
    KeyboardInterrupt never comes here: it is an interrupt wherever it is raised."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    return f"raised {short(exc)} (a BaseException that is not an Exception)"
