import pytest


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    """Every test lints with an empty cache of its own: what a test sees is never a result
    another test (or an earlier run of the suite) left behind."""
    monkeypatch.setenv("GMLP_LINT_CACHE_DIR", str(tmp_path_factory.mktemp("gmlp-lint-cache")))
