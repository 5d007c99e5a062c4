"""Turning a libcst node and a message into a ``Finding`` with positions and fix edits."""

from __future__ import annotations

import libcst as cst

from ..model import Edit, Finding, Fix
from .module import ModuleContext


class Collector:
    def __init__(self, context: ModuleContext, enabled: frozenset[str]) -> None:
        self.context = context
        self.enabled = enabled
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int, int]] = set()

    def report(self, code: str, node: cst.CSTNode, message: str, fix: Fix | None = None) -> None:
        if code not in self.enabled:
            return
        line, column, end_line, end_column = self.context.span(node)
        key = (code, line, column)
        if key in self._seen:  # the same site reached through two walks
            return
        self._seen.add(key)
        self.findings.append(
            Finding(code, self.context.path, line, column, end_line, end_column, message, fix)
        )

    def replace(self, node: cst.CSTNode, text: str) -> Edit:
        start, end = self.context.offsets(node)
        return Edit(start, end, text)

    def insert_after(self, node: cst.CSTNode, text: str) -> Edit:
        _, end = self.context.offsets(node)
        return Edit(end, end, text)

    def text(self, node: cst.CSTNode) -> str:
        return self.context.text(node)

    def line_start(self, node: cst.CSTNode) -> tuple[int, str]:
        """(offset where ``node``'s first line starts, the text before ``node`` on it)."""
        line, column, _, _ = self.context.span(node)
        start = self.context.line_starts[line - 1]
        return start, self.context.source[start : start + column - 1]

    def line_rest(self, node: cst.CSTNode) -> str:
        """The text after ``node`` on its last line (without the line break)."""
        _, _, end_line, end_column = self.context.span(node)
        starts = self.context.line_starts
        start = starts[end_line - 1] + end_column - 1
        end = starts[end_line] if end_line < len(starts) else len(self.context.source)
        return self.context.source[start:end].rstrip("\r\n")

    def insert_line_after(self, node: cst.CSTNode, text: str) -> Edit:
        """``text`` (a line ending in a newline) inserted after ``node``'s last line."""
        _, _, end_line, _ = self.context.span(node)
        starts = self.context.line_starts
        if end_line < len(starts):
            return Edit(starts[end_line], starts[end_line], text)
        end = len(self.context.source)
        return Edit(end, end, "\n" + text)
