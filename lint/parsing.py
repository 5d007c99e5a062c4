"""Whether a text is valid Python, and running the analysis of one without letting a file
crash or exhaust the run.

* Valid means what the running Python's compiler accepts (``compile`` with none of
  gmlp-lint's own ``__future__`` flags): the grammar, and also what only the compiler
  rejects (``return`` or ``nonlocal`` at module level, a duplicate argument, an unknown
  ``__future__``). Grammar changes between Python versions (3.12's f-strings), so every
  parse error names the Python that judged it.
* Warnings the compiler raises about the linted file (``SyntaxWarning: invalid escape
  sequence``) are the file's business, not gmlp-lint's output: they are silenced.
* libcst's parser and the rules recurse on the tree. The analysis runs on a thread of its
  own with a large stack and a raised recursion limit, so code Python accepts (1,000-long
  attribute or operator chains) is analysed instead of crashing; code nested deeper than
  ``MAX_ANALYSIS_DEPTH`` (which would cost gigabytes in libcst) is refused with one line.
* The garbage collector does not run while a file is analysed (``no_collections``), and
  the file's libcst tree is left out of the collection that ends it (``kept_from_collector``).
* libcst's checks on each node it builds are skipped while it parses a file Python has
  compiled (``trusted_parse``): they are meant for trees written by hand.
* Syntax newer than the running Python (PEP 695's ``class C[T: Bound]``, ``def f[T]`` and
  ``type X = ...``; PEP 701's f-strings, all Python 3.12) is still valid: a file the
  compiler rejects is given to libcst's parser, which knows the newer grammar; where it
  parses, those constructs are lowered to what the running Python compiles (type parameters
  dropped, ``type X = v`` as ``X = v``, f-strings as plain strings) and the result must
  compile (``newer_grammar``). So the compiler's own checks still hold for the rest of the
  file, and the rules analyse libcst's tree of the original text.
"""

from __future__ import annotations

import ast
import bisect
import gc
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from . import lines
from .source import SourceError

T = TypeVar("T")
PYTHON = f"Python {sys.version_info.major}.{sys.version_info.minor}"
# Deepest syntax tree analysed: 2,000 nested lambdas (about as deep as Python 3.11 compiles)
# cost libcst 0.8 GB and 2 s; deeper costs grow faster than linearly.
MAX_ANALYSIS_DEPTH = 2_000
# The analysis thread's stack and recursion limit: libcst's parser (native code) and the
# rules' visitors use about 100 KB of stack per level of a chain; 512 MiB is address space,
# only the pages a deep file touches are ever used.
ANALYSIS_STACK_BYTES = 512 * 2**20
ANALYSIS_RECURSION_LIMIT = 100_000


def syntax_error(text: str, path: str) -> SourceError | None:
    """Where the running Python rejects ``text``, or None when it compiles."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
    except UnicodeEncodeError as error:
        # A ValueError too: a lone surrogate, which a coding line such as
        # ``raw_unicode_escape`` can decode ``\\ud800`` to (Python: "surrogates not allowed").
        return _unencodable(text, error)
    except SyntaxError as error:
        if "null bytes" in str(error.msg):
            return _null_byte(text)
        newer = newer_grammar(text, path)
        if newer is not None:
            return newer if isinstance(newer, SourceError) else None
        return SourceError(f"cannot parse: {error.msg} ({PYTHON})", error.lineno, error.offset)
    except ValueError:  # Python 3.11 raises this for null bytes
        return _null_byte(text)
    except (RecursionError, MemoryError):
        return SourceError(f"cannot parse: nested too deeply for {PYTHON}'s compiler")
    return None


def _null_byte(text: str) -> SourceError:
    at = text.find("\0")
    return SourceError("cannot parse: the source contains a null byte", *_place(text, at))


def _unencodable(text: str, error: UnicodeEncodeError) -> SourceError:
    at = error.start if error.object == text else text.find(error.object[error.start :])
    return SourceError(
        f"cannot parse: {error.reason} ({error.object[error.start : error.end]!a})",
        *_place(text, at),
    )


def _place(text: str, at: int) -> tuple[int, int]:
    """The (line, column), from 1, of offset ``at``, lines ending as Python ends them (a lone
    ``\\r`` too: counting ``\\n`` alone put a NUL in a CR file on line 1)."""
    starts = lines.line_starts(text)
    line = bisect.bisect_right(starts, at)
    return line, at - starts[line - 1] + 1


def analysis_error(text: str, path: str) -> SourceError | None:
    """``syntax_error`` and then ``depth_error`` for a file the rules will analyse, with one
    parse instead of two: the syntax tree CPython's compiler builds is compiled (the checks
    only the compiler makes) and measured. Any failure is judged again by ``syntax_error``
    on the text, so every message is the one the two-step check gives."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            compile(tree, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return syntax_error(text, path) or depth_error(text, path)
    return _too_deep(nesting_depth(tree))


def depth_error(text: str, path: str) -> SourceError | None:
    """A refusal when ``text`` (valid Python) nests deeper than the analysis takes."""
    try:
        tree = ast.parse(text, path)
    except SyntaxError:  # newer grammar (``syntax_error`` accepted it): its lowering
        tree = newer_grammar(text, path)
        if not isinstance(tree, ast.AST):
            raise
    return _too_deep(nesting_depth(tree))


# What may make Python 3.11 reject a file that 3.12 accepts: a PEP 695 type parameter list
# or ``type`` statement on some line, or an f-string (PEP 701 lets one nest quotes of its
# own kind and backslashes). Only such files are handed to libcst after the compiler said
# no: a file rejected for anything else (a missing colon, 200 nested parentheses) costs no
# second parse.
_NEWER_GRAMMAR = re.compile(
    r"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+\w+[ \t]*\[|^[ \t]*type[ \t]+\w+[ \t]*[\[=]"
    r"|(?<![\w.])(?:[fF][rR]?|[rR][fF])[\"']",
    re.MULTILINE,
)


def newer_grammar(text: str, path: str) -> ast.AST | SourceError | None:
    """For a ``text`` the running Python rejected, that may use newer syntax and that libcst
    parses: CPython's syntax tree of it with the newer-grammar
    constructs lowered, or the compiler's error on the lowered text (what the file holds
    besides the newer syntax; lowering keeps the line numbers). None when it is not newer
    grammar (the compiler's first answer stands). What the lowering drops is not checked:
    a wrong conversion inside an f-string (``f"{x!z}"``) passes."""
    if sys.version_info >= (3, 12) or not _NEWER_GRAMMAR.search(text):
        return None  # the running Python knows PEP 695 and PEP 701, or neither is used
    from .newer_grammar import lowered

    try:
        text_lowered = run_deep(lambda: lowered(text))
    except (RecursionError, MemoryError):
        return None
    if text_lowered is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text_lowered, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            compile(tree, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        return SourceError(f"cannot parse: {error.msg} ({PYTHON})", error.lineno, error.offset)
    except (ValueError, RecursionError, MemoryError):
        return None
    return tree


def _too_deep(depth: int) -> SourceError | None:
    if depth <= MAX_ANALYSIS_DEPTH:
        return None
    return SourceError(
        f"cannot analyse: nested {depth} levels deep (gmlp-lint analyses code nested up to "
        f"{MAX_ANALYSIS_DEPTH} levels)"
    )


def nesting_depth(tree: ast.AST) -> int:
    """The depth of the deepest node, counted level by level (no recursion: the tree may be
    deep; no per-node tuple or generator: this runs over every node of every analysed
    file)."""
    depth = 0
    level = [tree]
    while level:
        depth += 1
        below = []
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, ast.AST):
                    below.append(value)
                elif isinstance(value, list):
                    below.extend(item for item in value if isinstance(item, ast.AST))
        level = below
    return depth


@contextmanager
def trusted_parse() -> Iterator[None]:
    """libcst's per-node checks off while it parses a file that Python compiled, then on
    again. libcst builds every node through a dataclass whose ``__post_init__`` calls the
    node's ``_validate`` (an identifier is an identifier, parentheses pair up, keywords have
    whitespace around them): checks meant for trees built by hand, which a tree its own
    parser made from valid source passes (libcst's own comment there says as much). They
    cost about a sixth of its parse (4.9-5.4 against 4.2 CPU s on Megatron-LM's analysed
    files). Only libcst's ``__post_init__`` as known, one that does nothing but call
    ``_validate``, is switched off; any other is left alone. Nodes the rules build after the
    parse are checked as before."""
    import libcst

    hook = libcst.CSTNode.__dict__.get("__post_init__")
    if not _only_validates(hook):
        yield
        return
    libcst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        yield
    finally:
        libcst.CSTNode.__post_init__ = hook  # type: ignore[method-assign]


def _only_validates(hook: object) -> bool:
    code = getattr(hook, "__code__", None)
    return code is not None and code.co_argcount == 1 and code.co_names == ("_validate",)


def _unchecked(self: object) -> None:
    """A node's ``__post_init__`` while ``trusted_parse`` holds: nothing to check."""


@contextmanager
def no_collections() -> Iterator[None]:
    """Python's cyclic garbage collector off while a file is parsed and analysed, then as
    before. Building a syntax tree allocates hundreds of thousands of objects that all stay
    alive until the file is done, and each collection they set off scans the growing tree
    for garbage it cannot hold: at the default threshold (700 allocations) that cost about a
    tenth of a run over Megatron-LM (15.7 against 17.5 CPU s, interleaved runs), and at a
    threshold of 100,000 another 5 % of the analysed files' time (9.67 against 9.15 CPU s,
    the fastest of four interleaved rounds each). The cycles one file leaves are collected
    by the first collection after it, as the default threshold sets off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def kept_from_collector() -> Iterator[None]:
    """Every object alive now left out of the garbage collector's scans until the block
    ends (``gc.freeze``), then put back in its oldest generation, and the block's own
    garbage collected (the youngest generation: what the block made). Entered right after a
    file's libcst tree is built, around its analysis: the tree has no cycles, but the
    analysis' objects that point into it do (units and their context, graph nodes). Without
    this, the collection that frees them scanned the whole tree first (up to a tenth of
    the CPU time of the analysed files); with it, only the analysis' objects are scanned,
    and the tree is freed by reference counting. A caller that froze objects itself is left
    alone (what it froze is its own to thaw)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect(0)


def run_deep(function: Callable[[], T]) -> T:
    """``function()`` on a thread with a large stack and a raised recursion limit; its
    exception, if any, is raised here. The calling thread only waits (in short steps, so a
    Ctrl-C is not held up by a long parse)."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the caller, which decides
            outcome["error"] = error

    previous_stack = threading.stack_size(ANALYSIS_STACK_BYTES)
    previous_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous_limit, ANALYSIS_RECURSION_LIMIT))
    try:
        thread = threading.Thread(target=target, name="gmlp-lint-analysis", daemon=True)
        thread.start()
    except RuntimeError:  # no thread of that size (a tight address-space limit)
        sys.setrecursionlimit(previous_limit)
        return function()  # a deep file then ends in RecursionError: "too deeply nested"
    finally:
        threading.stack_size(previous_stack)
    try:
        while thread.is_alive():
            thread.join(0.1)
    finally:
        sys.setrecursionlimit(previous_limit)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
