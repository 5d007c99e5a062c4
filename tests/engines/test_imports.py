"""The engines package imports without megatron-core (CI has neither it nor a GPU)."""

import subprocess
import sys

MODULES = (
    "agreement", "availability", "configs", "ddp", "fsdp", "launcher", "merge",
    "process_groups", "real_checks", "real_run", "reference", "step", "wrapped", "wrapping",
)  # fmt: skip


def test_every_engine_module_imports_without_loading_megatron():
    code = (
        "import sys\n"
        + "".join(f"import gmlp_check.engines.{m}\n" for m in MODULES)
        + "import gmlp_check.cli, gmlp_check.session\n"
        + "tops = ('megatron', 'megatron_fsdp')\n"
        + "loaded = sorted(m for m in sys.modules if m.split('.')[0] in tops)\n"
        + "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
