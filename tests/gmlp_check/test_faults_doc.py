"""docs/faults.md is generated from the declarations it documents and is current."""

from gmlp_check.faults import FAULTS, doc
from gmlp_check.faults.classes import BUG_CLASSES


def test_docs_faults_md_is_current():
    assert doc.main(["--check"]) == 0, "stale: run python -m gmlp_check.faults.doc"


def test_every_fault_and_class_has_a_row():
    text = doc.render()
    assert all(f"| `{name}` |" in text for name in FAULTS)
    assert all(f"| {name} |" in text for name in BUG_CLASSES)
