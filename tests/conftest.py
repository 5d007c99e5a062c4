import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _own_lint_cache(tmp_path_factory, monkeypatch):
    """Every test that runs gmlp-lint gets an empty result cache of its own: what it sees is
    never a result another test (or an earlier run of the suite) left behind, and nothing is
    written to the user's ~/.cache."""
    monkeypatch.setenv("GMLP_LINT_CACHE_DIR", str(tmp_path_factory.mktemp("gmlp-lint-cache")))
