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


def test_megatron_emulated_never_tries_to_import_megatron():
    """Where megatron-core is installed, importing it (and Transformer Engine with it) costs
    seconds at every start; --megatron emulated needs none of it. 'auto' must try, which shows
    the probe would see an import."""
    code = (
        "import sys, torch\n"
        "from gmlp_check.engines import availability\n"
        "tried = []\n"
        "class Probe:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'megatron':\n"
        "            tried.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Probe())\n"
        "torch.cuda.is_available = lambda: True\n"
        "cuda = torch.device('cuda')\n"
        "assert availability.resolve('emulated', cuda) == 'emulated'\n"
        "assert not tried, tried\n"
        "availability.resolve('auto', cuda)\n"
        "assert tried, 'the probe saw no import'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
