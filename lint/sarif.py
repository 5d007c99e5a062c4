"""SARIF 2.1.0 output for GitHub code scanning.

Every rule is described in ``tool.driver.rules`` (short and full description, help text
and markdown from the rule's documentation); results point at files by URI relative to
``%SRCROOT%`` (the directory gmlp-lint ran in), columns in Unicode code points. Files that
could not be read or parsed appear as error notifications of the invocation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from .catalog import all_rules
from .model import Finding
from .reporters import sort_findings

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gmlp-check")
    except PackageNotFoundError:
        return "0.0.0"


def _uri(path: str) -> tuple[str, bool]:
    """(URI, whether it is relative to %SRCROOT%)."""
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(Path.cwd().resolve())
    except ValueError:
        return absolute.as_uri(), False
    return quote(relative.as_posix()), True


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


def to_sarif(findings: Sequence[Finding], errors: Sequence[tuple[str, str]] = ()) -> str:
    rules = all_rules()
    index = {rule.code: i for i, rule in enumerate(rules)}
    notifications = [
        {
            "level": "error",
            "message": {"text": f"{path}: {message}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(path)[0]}}}],
        }
        for path, message in errors
    ]
    root = Path.cwd().resolve().as_uri() + "/"
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
                "results": [_result(f, index) for f in sort_findings(findings)],
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
