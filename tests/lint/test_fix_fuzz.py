"""A fuzz test of --fix: the rules' own examples and the real-code fixtures, combined and
mutated (line endings LF, CRLF, CR and mixed; form feeds; Unicode separators in comments
and strings; a byte order mark; tabs; trailing whitespace; no final newline), each fixed
twice. Every fixed file must compile, be left alone by a second fix, keep every line no
finding touched byte for byte, and use no line ending the file did not already use.

The seed is fixed, so a failure reproduces; GMLP_LINT_FUZZ_ITERATIONS runs more cases
(and GMLP_LINT_FUZZ_SEED other ones)."""

from __future__ import annotations

import bisect
import difflib
import os
import random
import re
import warnings

import pytest

from gmlp_check.lint import engine, lines
from gmlp_check.lint.registry import all_rules
from gmlp_check.lint.source import SourceError, decode

from .support import ALL_CODES, FIXTURES

ITERATIONS = int(os.environ.get("GMLP_LINT_FUZZ_ITERATIONS", "150"))
SEED = int(os.environ.get("GMLP_LINT_FUZZ_SEED", "17"))
SEPARATORS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
ENDINGS = ["\n", "\r\n", "\r"]

EXAMPLES = [e.source for r in all_rules() for e in (*r.invalid, *r.valid)]
REAL = [path.read_text() for path in sorted(FIXTURES.glob("*.py"))]


# -- mutations: each takes and returns LF text (endings are chosen last) -------------------------
def form_feeds(text: str, rng: random.Random) -> str:
    """Form feeds as code uses them, as page breaks: a line of its own or the start of an
    unindented line. (libcst cannot parse a form feed inside indentation before a dedent,
    which Python accepts; such a file is refused with one error line, see test_parse_guard.)"""
    out = []
    for line in text.splitlines(keepends=True):
        if line[:1] not in ("", " ", "\t", "\n") and rng.random() < 0.3:
            line = rng.choice(["\x0c\n", "\x0c"]) + line
        out.append(line)
    return "".join(out)


def separators_in_comments_and_strings(text: str, rng: random.Random) -> str:
    """Separator characters where Python allows any character: comments and string literals
    on lines of their own, and appended to existing comments."""
    out = []
    for line in text.split("\n"):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "#" in line and "'" not in line and '"' not in line and rng.random() < 0.5:
            line += rng.choice(SEPARATORS) + "x"
        out.append(line)
        if line.strip() and not line.rstrip().endswith((":", "\\", ",", "(", "[", "{")):
            if rng.random() < 0.15:
                out.append(f"{indent}# note{rng.choice(SEPARATORS)}here")
            elif rng.random() < 0.1:
                out.append(f"{indent}_text = 'a{rng.choice(SEPARATORS)}b'")
    return "\n".join(out)


def tabs(text: str, rng: random.Random) -> str:
    """Every four-space indentation step written as a tab."""
    return re.sub(r"(?m)^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), text)


def trailing_whitespace(text: str, rng: random.Random) -> str:
    return "\n".join(
        line + rng.choice([" ", "\t", "  \t"])
        if line and not line.endswith("\\") and rng.random() < 0.3
        else line
        for line in text.split("\n")
    )


def no_final_newline(text: str, rng: random.Random) -> str:
    return text.rstrip("\n")


MUTATIONS = [form_feeds, separators_in_comments_and_strings, tabs, trailing_whitespace]


def with_endings(text: str, rng: random.Random) -> str:
    style = rng.choice(["\n", "\r\n", "\r", "mixed"])
    if style != "mixed":
        return text.replace("\n", style)
    return "".join(
        line[:-1] + rng.choice(ENDINGS) if line.endswith("\n") else line
        for line in text.splitlines(keepends=True)
    )


def generate(rng: random.Random) -> bytes:
    """One source file: one to three pieces of the corpus, mutated, as bytes."""
    pieces = rng.sample(EXAMPLES, rng.randint(1, 3)) if rng.random() < 0.7 else [rng.choice(REAL)]
    text = "\n".join(pieces)
    for mutation in MUTATIONS:
        if rng.random() < 0.4:
            text = mutation(text, rng)
    if rng.random() < 0.2:
        text = no_final_newline(text, rng)
    text = with_endings(text, rng)
    data = text.encode()
    return b"\xef\xbb\xbf" + data if rng.random() < 0.15 else data


def compiles(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, "fuzz.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


# -- the properties -------------------------------------------------------------------------------
def fix(data: bytes) -> bytes:
    source = decode(data)
    fixed, _, _ = engine.fix_source(source.text, "fuzz.py", ALL_CODES, unsafe=True)
    return fixed.encode(source.encoding)


def touched_lines(text: str) -> set[int]:
    """Lines (from 0) the fixes may change: those their edits span, and the neighbours (an
    insertion at a line's end or start shows as a change next to it)."""
    starts = lines.line_starts(text)

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset) - 1

    touched: set[int] = set()
    for finding in engine.lint_source(text, "fuzz.py", ALL_CODES):
        for edit in finding.fix.edits if finding.fix is not None else ():
            touched.update(range(line_of(edit.start) - 1, line_of(edit.end) + 2))
    return touched


def changed_lines(before: str, after: str) -> set[int]:
    old, new = lines.split(before), lines.split(after)
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(i1, max(i2, i1 + 1)))
    return changed


def endings(text: str) -> set[str]:
    return set(lines.ENDING.findall(text))


def check_case(data: bytes) -> None:
    once = fix(data)
    assert compiles(once), "the fixed file does not compile"
    assert fix(once) == once, "a second --fix changed the file again"
    before, after = decode(data).text, decode(once).text
    assert once.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    stray = changed_lines(before, after) - touched_lines(before)
    # the last line may change when a fix appends after it (no final newline)
    stray.discard(len(lines.split(before)) - 1)
    assert not stray, f"lines no fix touches changed: {sorted(stray)}"
    assert endings(after) <= (endings(before) or {"\n"}), "a line ending the file never used"


def cases() -> list[bytes]:
    rng = random.Random(SEED)
    found = []
    while len(found) < ITERATIONS:
        data = generate(rng)
        if compiles(data):  # the input must be valid Python for the properties to apply
            found.append(data)
    return found


def test_fix_keeps_every_generated_and_mutated_file_valid_stable_and_in_place():
    failures = []
    for number, data in enumerate(cases()):
        try:
            check_case(data)
        except (AssertionError, SourceError) as error:
            failures.append(f"case {number} ({error}): {data[:200]!r}")
    assert not failures, f"{len(failures)} of {ITERATIONS} cases failed:\n" + "\n".join(
        failures[:5]
    )


@pytest.mark.parametrize("mutation", [*MUTATIONS, no_final_newline])
def test_every_mutation_keeps_the_corpus_valid_python_often(mutation):
    # A mutation that always broke the code would test nothing.
    rng = random.Random(SEED)
    kept = sum(compiles(mutation(text, rng).encode()) for text in EXAMPLES)
    assert kept >= len(EXAMPLES) * 0.8
