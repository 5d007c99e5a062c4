"""Lines as Python (and libcst) count them: a line ends at ``\\r\\n``, a lone ``\\r`` or
``\\n``, and nowhere else. ``str.splitlines`` also splits at form feeds, vertical tabs,
``\\x1c``-``\\x1e``, ``\\x85`` and the Unicode line and paragraph separators, which Python
reads as ordinary characters; offsets computed from it point at the wrong code.
"""

from __future__ import annotations

import itertools
import re

ENDING = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """Offset of the first character of each line (line N starts at ``[N - 1]``)."""
    return [0, *(match.end() for match in ENDING.finditer(text))]


def split(text: str) -> list[str]:
    """The lines of ``text``, each with its ending (the last one may have none)."""
    starts = line_starts(text)
    lines = [text[start:end] for start, end in itertools.pairwise(starts)]
    if starts[-1] < len(text):
        lines.append(text[starts[-1] :])
    return lines


def ending_at(text: str, offset: int) -> str | None:
    """The ending of the line that holds ``offset``; None on a last line without one."""
    if 0 < offset < len(text) and text[offset - 1 : offset + 1] == "\r\n":
        return "\r\n"
    match = ENDING.search(text, offset)
    return match.group() if match else None


def first_ending(text: str) -> str:
    """The file's newline as libcst takes it (its first line's), ``\\n`` when it has none."""
    match = ENDING.search(text)
    return match.group() if match else "\n"


def with_newline(text: str, newline: str) -> str:
    """``text`` with every bare ``\\n`` (one not after ``\\r``) written as ``newline``.
    Endings already written another way (copied from the file) stay as they are."""
    if newline == "\n" or "\n" not in text:
        return text
    return re.sub(r"(?<!\r)\n", newline, text)
