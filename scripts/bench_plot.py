"""Redraw the `gmlp-check bench` plot, or print its table, from a JSON document it wrote.

Usage: python scripts/bench_plot.py bench.json [bench.png]

A run stopped part-way leaves a document with "complete": false holding the workloads it
finished; this draws those.
"""

import json
import sys
from pathlib import Path

from rich.console import Console

from gmlp_check.bench.plot import write_png
from gmlp_check.bench.report import SCHEMA, print_tables


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    doc = json.loads(Path(argv[0]).read_text())
    if doc.get("schema") != SCHEMA:
        print(
            f"{argv[0]}: expected a {SCHEMA} document, got {doc.get('schema')!r}", file=sys.stderr
        )
        return 2
    if len(argv) == 2:
        write_png(doc, Path(argv[1]))
    else:
        print_tables(doc, Console(width=180))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
