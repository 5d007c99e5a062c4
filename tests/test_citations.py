"""Comments and strings in product code cite upstream code by function or class and release, never
by ``file.py:line``: line numbers go stale with every release of Transformer Engine or Megatron.

Every comment and string literal (docstrings included) of the product folders is scanned, so a
citation in an error message or a data table counts too. A continuation such as ``:1524-1541``
after an earlier ``file.py:NNN`` is caught as well.
"""

import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT_FOLDERS = ("gmlp_check", "refimpl", "fused", "bench", "lint", "scripts")

# A source file with a line number (``basic_linear.py:1083``, ``math.h:80``), or a bare line
# reference ``:1524`` / ``:1524-1541`` where no name, bracket or quote comes before the colon
# (``x[:300]``, ``{n:10}`` and ``"a":1`` are not citations).
PINNED_LINE = re.compile(
    r"[\w/.-]+\.(?:py|pyi|h|hpp|cuh?|cc|cpp):\d+|(?<![\w\]\)\[{}'\"]):\d{2,}(?:-\d+)?\b"
)

# Lines that report a file and line on purpose: (path relative to the repo, the matched text).
# None today; add one only with the reason beside it.
DECLARED_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()


def text_tokens(path: Path):
    """(line, text) of each comment and string piece of a Python file."""
    kinds = {tokenize.COMMENT, tokenize.STRING}
    fstring_middle = getattr(tokenize, "FSTRING_MIDDLE", None)  # Python >= 3.12
    if fstring_middle is not None:
        kinds.add(fstring_middle)
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in kinds:
            yield tok.start[0], tok.string


def pinned_citations(path: Path) -> list[tuple[int, str]]:
    found = []
    for line, text in text_tokens(path):
        for match in PINNED_LINE.finditer(text):
            found.append((line + text[: match.start()].count("\n"), match.group()))
    return found


def product_files() -> list[Path]:
    return sorted(
        path
        for folder in PRODUCT_FOLDERS
        for path in (REPO / folder).rglob("*.py")
        if "fixtures" not in path.relative_to(REPO).parts
    )


def test_product_code_cites_no_pinned_line():
    found = [
        f"{path.relative_to(REPO)}:{line}: {text}"
        for path in product_files()
        for line, text in pinned_citations(path)
        if (str(path.relative_to(REPO)), text) not in DECLARED_EXCEPTIONS
    ]
    assert not found, "cite the upstream function and release instead:\n" + "\n".join(found)


# (a line of Python, whether it pins a line): citations are found in comments, docstrings,
# strings and f-strings; slices, format specs, times and names are not citations.
SAMPLES = [
    ("# DDP's hook (distributed_data_parallel.py:482-489) asserts\n", True),
    ('"""Gated on the local flag (:1113-1114)."""\n', True),
    ('SOURCE = "math.h:80 silu(x)"\n', True),
    ('msg = f"{name}: see ops/basic/basic_linear.py:98"\n', True),
    ("x = values[:300]  # the first 300\n", False),
    ('line = f"{count:10}"\n', False),
    ("# megatron-core 0.19.2 ``DistributedDataParallel._make_backward_post_hook``\n", False),
    ('TIME = "12:30"\n', False),
]


@pytest.mark.parametrize(("source", "pinned"), SAMPLES)
def test_what_counts_as_a_pinned_line(tmp_path, source, pinned):
    path = tmp_path / "module.py"
    path.write_text(source)
    assert bool(pinned_citations(path)) == pinned
