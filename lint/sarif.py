"""SARIF 2.1.0 output for GitHub code scanning.

Every rule is described in ``tool.driver.rules`` (short and full description, help text
and markdown from the rule's documentation); results point at files by URI relative to
``%SRCROOT%`` (the directory gmlp-lint ran in), columns in Unicode code points. A URI
percent-encodes the path's bytes, so a file name that is not UTF-8 keeps them exactly; every
text shows such bytes as U+FFFD (lint/json_text.py), so the log is strict UTF-8 JSON. Paths that
could not be checked or fixed (missing, unreadable, not valid Python, not written) appear as
error notifications of the invocation, whose ``executionSuccessful`` is then false.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from .json_text import dumps
from .model import FileError, Finding
from .registry import all_rules

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gmlp-check")
    except PackageNotFoundError:
        return "0.0.0"


def _uri(path: str) -> tuple[str, bool]:
    """(URI, whether it is relative to %SRCROOT%)."""
    # realpath, unlike Path.resolve on Python < 3.13, does not raise on a symlink loop.
    absolute = Path(os.path.realpath(path))
    try:
        relative = absolute.relative_to(os.path.realpath(os.getcwd()))
    except ValueError:
        return absolute.as_uri(), False
    # The path's bytes, as Path.as_uri quotes them: a file name that is not UTF-8 holds
    # surrogate escapes, which quote() of the text cannot encode.
    return quote(os.fsencode(relative.as_posix())), True


def _rule_descriptor(rule) -> dict:
    documentation = rule.documentation()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": " ".join(rule.explanation.split())},
        "help": {"text": documentation, "markdown": documentation},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["correctness", "main_grad"]},
    }


def _result(finding: Finding, index: dict[str, int]) -> dict:
    uri, relative = _uri(finding.path)
    location = {"uri": uri}
    if relative:
        location["uriBaseId"] = "%SRCROOT%"
    return {
        "ruleId": finding.code,
        "ruleIndex": index[finding.code],
        "level": "error",
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": {
                        "startLine": finding.line,
                        "startColumn": finding.column,
                        "endLine": finding.end_line,
                        "endColumn": finding.end_column,
                    },
                }
            }
        ],
    }


def _notification(error: FileError) -> dict:
    """A path that could not be checked or fixed, as a tool execution notification."""
    uri, relative = _uri(error.path)
    physical: dict = {"artifactLocation": {"uri": uri}}
    if relative:
        physical["artifactLocation"]["uriBaseId"] = "%SRCROOT%"
    if error.line is not None:
        physical["region"] = {"startLine": error.line, "startColumn": error.column or 1}
    return {
        "level": "error",
        "message": {"text": f"{error.location}: {error.message}"},
        "locations": [{"physicalLocation": physical}],
    }


def to_sarif(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """The SARIF log of ``findings``, in the order given (reporters.render sorts them)."""
    rules = all_rules()
    index = {rule.code: i for i, rule in enumerate(rules)}
    notifications = [_notification(error) for error in errors]
    root = Path(os.path.realpath(os.getcwd())).as_uri() + "/"
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gmlp-lint",
                        "version": _version(),
                        "rules": [_rule_descriptor(rule) for rule in rules],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root}},
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {
                        "executionSuccessful": not errors,
                        "toolExecutionNotifications": notifications,
                        "workingDirectory": {"uri": root},
                    }
                ],
                "results": [_result(f, index) for f in findings],
            }
        ],
    }
    return dumps(log) + "\n"
