"""The ``gmlp-check`` console script. It imports nothing heavy itself, so that Ctrl-C while
torch and the checker load (several seconds on a cold cache) is one "interrupted" line and
exit 130, not a traceback. A reader that closes the pipe early (``| head``) ends nothing
(gmlp_check.lint.closed_output)."""

from __future__ import annotations

import sys

from .lint.closed_output import tolerate_closed_output


def main() -> None:
    tolerate_closed_output()
    try:
        from .cli import main as commands
    except KeyboardInterrupt:
        sys.stderr.write("gmlp-check: interrupted\n")
        sys.exit(130)
    commands()
