"""Where a node of a parsed file sits, as offsets into its text, computed for the nodes that
are asked about rather than for every node.

libcst's ``PositionProvider`` regenerates the whole file's code while recording a range for
each of its nodes: 0.34 s for Transformer Engine's ``layernorm_mlp.py``, whose plain code
generation takes 0.05 s. A file is only located when a rule reports in it or a fix edits it,
usually at a handful of nodes. So a node is located by generating code only up to its end
while counting characters, and recording ranges only inside it (a node's syntactic range may
be hoisted from its first and last children, as ``PositionProvider`` does). The result is
the same range ``PositionProvider`` gives (tests compare them node by node). After
``FULL_AFTER`` nodes of one file it pays for ``PositionProvider`` once instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider

from ..lines import ENDING

# One partial code generation costs about as much as a sixth of PositionProvider's pass.
FULL_AFTER = 6


class _Located(Exception):
    """Ends code generation once the node asked about has been generated."""


@dataclass(frozen=False)
class _Counting(CodegenState):
    """Code generation that keeps line and column (as ``PositionProvider`` counts them)
    instead of tokens, and records (start, end) positions for the target and the nodes
    inside it. Lines and columns, not offsets into the generated code: libcst drops a form
    feed that starts a file, so its code is not always the text it parsed."""

    target: object = None
    line: int = 1
    column: int = 0
    ranges: dict = field(default_factory=dict)
    _stack: list = field(default_factory=list)
    _inside: int = 0

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        if not self.tokens:
            self.tokens.append(value)  # Module asks whether anything was generated at all
        self._advance(value)

    def _advance(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
            return
        segments = ENDING.split(value)
        self.line += len(segments) - 1
        self.column = len(segments[-1])

    def pop_trailing_newline(self) -> None:
        pass  # only reached after the whole module: the target was never met

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node is self.target:
            self._inside += 1
        if self._inside:
            self._stack.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if self._inside:
            start = self._stack.pop()
            self.ranges.setdefault(id(node), (start, (self.line, self.column)))
        if node is self.target:
            self._inside = 0  # the ancestors' ranges unwinding from here are not wanted
            raise _Located

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Iterator[None]:
        start = (self.line, self.column)
        try:
            yield
        finally:
            if self._inside:
                if start_node is not None:
                    start = self.ranges[id(start_node)][0]
                end = self.ranges[id(end_node)][1] if end_node is not None else None
                self.ranges[id(node)] = (start, end or (self.line, self.column))


class Locator:
    """Offsets of the nodes of one module, each computed when first asked for."""

    def __init__(self, module: cst.Module, line_starts: list[int]) -> None:
        self.module = module
        self.line_starts = line_starts
        self.found: dict[int, tuple[int, int]] = {}
        self.partial_runs = 0
        self.full = False

    def offsets(self, node: cst.CSTNode) -> tuple[int, int]:
        key = id(node)
        if key not in self.found:
            if self.partial_runs >= FULL_AFTER and not self.full:
                self._locate_all()
            if key not in self.found:
                self._locate(node)
        return self.found[key]

    def _locate(self, node: cst.CSTNode) -> None:
        self.partial_runs += 1
        state = _Counting(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            target=node,
        )
        with suppress(_Located):
            self.module._codegen(state)
        if id(node) not in state.ranges:
            raise KeyError(f"{type(node).__name__} is not a node of this module")
        (line, column), (end_line, end_column) = state.ranges[id(node)]
        self.found.setdefault(id(node), self._offsets(line, column, end_line, end_column))

    def _locate_all(self) -> None:
        self.full = True
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        for node, where in wrapper.resolve(PositionProvider).items():
            start, end = where.start, where.end
            found = self._offsets(start.line, start.column, end.line, end.column)
            self.found.setdefault(id(node), found)

    def _offsets(self, line: int, column: int, end_line: int, end_column: int):
        """Offsets into the text; past its end for the newline libcst adds and drops at
        the end of a file without one."""
        starts = self.line_starts
        last = len(starts)
        start = starts[min(line, last) - 1] + column
        return start, starts[min(end_line, last) - 1] + end_column
