"""Roundabout spellings of an attribute store, an attribute read and a tensor method call,
rewritten to the plain ones before the rules read a file.

The rules reason about objects and their attributes in the plain spelling
(``w.grad_added_to_main_grad = True``, ``w.main_grad``, ``mg.add_(g)``; ``setattr`` and
``getattr`` too, which every rule reads). Python has other spellings of the same operations
(``vars(w).update(grad_added_to_main_grad=True)``, ``w.__dict__["main_grad"]``,
``object.__setattr__(w, ...)``, ``torch.Tensor.add_(mg, g)``) and a bug written in one of
them slipped past every rule that knew only the plain one. Rather than teach each rule each
spelling, the text the rules read has them in the plain form (``spelling_forms.SPELLINGS``).

The rewrite keeps every line where it was: a replacement has as many line breaks as the
text it replaces (those it lacks go inside parentheses), so findings keep their lines;
``Rewrite.in_original`` places them back in the original text (their columns mapped; a
fix kept only when no edit touches rewritten text, its edits moved back). A rewrite that does
not compile is not used: the rules read the original text, as before.
"""

from __future__ import annotations

import ast
import bisect
import re
import warnings
from dataclasses import dataclass, replace
from functools import cached_property

from . import lines
from .model import Edit, Finding
from .spelling_forms import SPELLINGS, Source

# Only files that spell one of these are parsed again: the rest cost one regex search.
# (``vars(args)`` alone, or ``self.__dict__`` read whole, is none of them.)
_TRIGGER = re.compile(
    r"\bvars\([^()]*\)\s*(?:\.update\(|\[)|__dict__\s*(?:\.update\(|\[)"
    r"|__setattr__\(|__getattribute__\(|attrgetter\(|\bTensor\.[a-z]\w*\("
)


# The node types a spelling can be (a call, an item read or an item store).
_SHAPES = (ast.Call, ast.Subscript, ast.Assign)


@dataclass(frozen=True)
class Rewrite:
    """The text the rules read and how its places map back to the original's. ``spans``:
    (original start, original end, new start, new end) of each rewritten text, in order."""

    original: str
    text: str
    spans: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.spans)

    def _back(self, offset: int, at_end: bool) -> int:
        """The original offset of the new text's ``offset``; inside a rewritten text, that
        text's start (or its end for ``at_end``)."""
        index = bisect.bisect_right([span[2] for span in self.spans], offset) - 1
        if index < 0:
            return offset
        old_start, old_end, _, new_end = self.spans[index]
        if offset < new_end or (at_end and offset == new_end):
            return old_end if at_end else old_start
        return offset - new_end + old_end

    @cached_property
    def _line_starts(self) -> tuple[list[int], list[int]]:
        return lines.line_starts(self.text), lines.line_starts(self.original)

    def position(self, line: int, column: int, at_end: bool = False) -> tuple[int, int]:
        """The original (line, column), from 1, of the new text's (line, column)."""
        new_starts, old_starts = self._line_starts
        offset = self._back(new_starts[line - 1] + column - 1, at_end)
        old_line = bisect.bisect_right(old_starts, offset)
        return old_line, offset - old_starts[old_line - 1] + 1

    def in_original(self, finding: Finding) -> Finding:
        """A finding on the new text, placed in the original; its fix kept only when no
        edit touches rewritten text."""
        line, column = self.position(finding.line, finding.column)
        end_line, end_column = self.position(finding.end_line, finding.end_column, at_end=True)
        fix = finding.fix
        if fix is not None:
            edits = tuple(self.edit(edit) for edit in fix.edits)
            fix = None if None in edits else replace(fix, edits=edits)
        return replace(
            finding, line=line, column=column, end_line=end_line, end_column=end_column, fix=fix
        )

    def edit(self, edit: Edit) -> Edit | None:
        """The edit in the original's offsets; None when it touches rewritten text."""
        for _, _, new_start, new_end in self.spans:
            if edit.start < new_end and new_start < max(edit.end, edit.start + 1):
                return None
        return Edit(self._back(edit.start, False), self._back(edit.end, True), edit.text)


def rewrite(text: str) -> Rewrite:
    """``text`` with every spelling of SPELLINGS in its plain form, line for line."""
    if not _TRIGGER.search(text):
        return Rewrite(text, text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Rewrite(text, text)
    src = Source(text, tree)
    found: list[tuple[int, int, str]] = []
    # Innermost first (deepest nodes end up inside their parents' texts), then outermost kept.
    nodes = sorted(
        (node for node in ast.walk(tree) if type(node) in _SHAPES),
        key=lambda node: src.span(node)[1] - src.span(node)[0],
    )
    for node in nodes:
        for spelling in SPELLINGS:
            plain = spelling.rewrite(node, src)
            if plain is not None:
                start, end = src.span(node)
                found.append((start, end, _padded(plain, text[start:end])))
                src.inner = sorted(found, key=_outer_first)
                break
    outer = _outermost(found)
    if not outer:
        return Rewrite(text, text)
    pieces, spans, cursor, shift = [], [], 0, 0
    for start, end, plain in outer:
        pieces += [text[cursor:start], plain]
        spans.append((start, end, start + shift, start + shift + len(plain)))
        shift += len(plain) - (end - start)
        cursor = end
    new_text = "".join(pieces) + text[cursor:]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(new_text, "<plain spellings>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Rewrite(text, text)
    return Rewrite(text, new_text, tuple(spans))


def _padded(plain: str, replaced: str) -> str:
    """``plain`` with the line breaks of ``replaced`` it lacks, inside parentheses."""
    breaks = lines.ENDING.findall(replaced)
    missing = breaks[len(lines.ENDING.findall(plain)) :]
    if not missing:
        return plain
    if plain.endswith(")"):  # a call, or an assignment's last value (``_assignments``)
        return plain[:-1] + "".join(missing) + ")"
    return f"({plain}{''.join(missing)})"


def _outer_first(item: tuple[int, int, str]) -> tuple[int, int]:
    return item[0], -item[1]


def _outermost(found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    kept: list[tuple[int, int, str]] = []
    for start, end, plain in sorted(found, key=_outer_first):
        if kept and start < kept[-1][1]:
            continue  # inside a kept one, whose text already holds it
        kept.append((start, end, plain))
    return kept
