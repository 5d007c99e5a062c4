"""Which files are tests: found in a walk, they are compiled (a syntax error is still
reported) but not analysed, unless ``analyse-tests = true`` is configured.

Why: the contract gmlp-lint enforces is producer and integration code's (CONTRACT.md), and
every measurement of the rules (the history corpus, the dated split, the releases, the
judged findings at the heads) is over non-test files only. A test file sets ``main_grad``
up by hand, and often breaks the contract on purpose; its findings were never judged. Such
files are also a third to a half of what names a trigger in Megatron-LM's and Transformer
Engine's trees, and the analysis is the run's cost.

A file named on the command line is analysed whatever its name (as an excluded file named
there is linted, unless ``--force-exclude``), and so is everything below a directory named
there that is, or lies in, a test directory: asking for tests by name is asking for them.
"""

from __future__ import annotations

from collections.abc import Sequence

# The same files as scripts/lint_history.py's ``NON_TEST_PATHSPEC`` leaves out.
TEST_DIRS = frozenset({"tests", "test"})
TEST_FILE_PREFIXES = ("test_",)
TEST_FILE_SUFFIXES = ("_test.py", "_test.pyi")
TEST_FILE_NAMES = frozenset({"conftest.py"})


def is_test_file(parts: Sequence[str]) -> bool:
    """Whether the path whose components are ``parts`` (directories, then the file name) is
    a test: a file named like one, or any file below a test directory."""
    *directories, name = parts
    return (
        name.startswith(TEST_FILE_PREFIXES)
        or name.endswith(TEST_FILE_SUFFIXES)
        or name in TEST_FILE_NAMES
        or not TEST_DIRS.isdisjoint(directories)
    )


def in_test_directory(parts: Sequence[str]) -> bool:
    """Whether a directory whose path has these components is, or lies in, a test
    directory."""
    return not TEST_DIRS.isdisjoint(parts)
