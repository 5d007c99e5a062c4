"""Emulated and real verdicts compared case by case."""

import json

from gmlp_check.engines.agreement import main


def report(statuses: dict[str, tuple[str, list[str]]]) -> dict:
    return {
        "schema": "gmlp-check/diff/v1",
        "cases": [
            {
                "id": case,
                "status": status,
                "checks": [{"observable": o, "passed": False} for o in failing]
                + [{"observable": "output", "passed": True}],
            }
            for case, (status, failing) in statuses.items()
        ],
    }


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_agreeing_reports_exit_0(tmp_path, capsys):
    doc = report({"a": ("passed", []), "b": ("failed", ["run"])})
    assert main([write(tmp_path, "e.json", doc), write(tmp_path, "r.json", doc)]) == 0
    assert capsys.readouterr().out.strip() == "2 of 2 cases reach the same verdict"


def test_each_disagreement_is_one_line_with_both_sides(tmp_path, capsys):
    emulated = report({"a": ("passed", []), "b": ("passed", []), "c": ("passed", [])})
    real = report({"a": ("passed", []), "b": ("failed", ["main_grad.synced"])})
    code = main([write(tmp_path, "e.json", emulated), write(tmp_path, "r.json", real)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out == [
        "1 of 3 cases reach the same verdict",
        "  b: emulated passed, real failed (main_grad.synced)",
        "  c: emulated passed, real absent",
    ]


def test_a_known_deviation_of_one_engine_agrees_and_is_noted(tmp_path, capsys):
    # An upstream deviation the emulation does not model xfails under the real engine: both
    # verdicts are green, so they agree; the status difference is listed as a note.
    emulated = report({"a": ("passed", []), "b": ("passed", [])})
    real = report({"a": ("passed", []), "b": ("xfailed", ["main_grad.synced"])})
    code = main([write(tmp_path, "e.json", emulated), write(tmp_path, "r.json", real)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out == [
        "2 of 2 cases reach the same verdict",
        "1 of them with different statuses:",
        "  b: emulated passed, real xfailed (main_grad.synced)",
    ]


def test_an_xpass_is_red(tmp_path, capsys):
    emulated = report({"a": ("passed", [])})
    real = report({"a": ("xpassed", [])})
    assert main([write(tmp_path, "e.json", emulated), write(tmp_path, "r.json", real)]) == 1


def test_something_else_than_a_diff_report_exits_2(tmp_path, capsys):
    good = write(tmp_path, "e.json", report({}))
    assert main([good, write(tmp_path, "bad.json", {"schema": "other"})]) == 2
    assert "expected a gmlp-check/diff/v1 report" in capsys.readouterr().err
    assert main([good]) == 2
