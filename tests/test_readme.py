"""The README's tables are generated from the declarations they document (the scenario matrix,
the observables, the faults, the backends, the lint rules, the known deviations): none is
stale, and every generated block has a generator."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "readme_tables.py"


def load_script():
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_in_the_readme_is_current():
    script = load_script()
    text = script.README.read_text()
    rendered, unknown = script.render(text)
    assert unknown == []
    for name in ("axes", "parts", "modes", "observables", "faults", "backends", "lint-rules"):
        assert f"<!-- generated: {name} -->" in text, name
    assert rendered == text, "stale tables: run python scripts/readme_tables.py"


def test_a_stale_table_is_detected(tmp_path, monkeypatch):
    script = load_script()
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- generated: faults -->\nold\n<!-- end: faults -->\n")
    monkeypatch.setattr(script, "README", readme)
    assert script.main(["--check"]) == 1
    assert script.main([]) == 0 and "old" not in readme.read_text()
    assert script.main(["--check"]) == 0
