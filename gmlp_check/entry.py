"""The ``gmlp-check`` console script. It imports nothing heavy itself, so that Ctrl-C while
torch and the checker load (several seconds on a cold cache) is one "interrupted" line and
exit 130, not a traceback. A reader that closes the pipe early (``| head``) ends nothing
(gmlp_check.lint.standard_streams)."""

from __future__ import annotations

import sys

from .lint.standard_streams import prepare_standard_streams


def main() -> None:
    prepare_standard_streams()
    try:
        from .cli import main as commands
    except KeyboardInterrupt:
        sys.stderr.write("gmlp-check: interrupted\n")
        sys.exit(130)
    commands()
