"""The ``gmlp-check`` console script. It imports nothing heavy itself, so that Ctrl-C while
torch and the checker load (several seconds on a cold cache) is one "interrupted" line and
exit 130, not a traceback (SIGTERM: the same line and 143). A reader that closes the pipe
early (``| head``) ends nothing (gmlp_check.lint.standard_streams)."""

from __future__ import annotations

import sys

from .interrupts import exit_code, sigterm_interrupts
from .lint.standard_streams import prepare_standard_streams


def main() -> None:
    prepare_standard_streams()
    try:
        # SIGTERM while loading too (``timeout 1 gmlp-check ...``): without a handler yet it
        # killed the process with no line at all, where Ctrl-C gave one.
        with sigterm_interrupts():
            from .cli import main as commands
    except KeyboardInterrupt as interrupt:
        sys.stderr.write("gmlp-check: interrupted\n")
        sys.exit(exit_code(interrupt))
    commands()
