"""gmlp_check.backends: built-in names and "package.module:factory" specs, loaded one way; the
protocol a built module must meet; and their errors, each naming --fused."""

import importlib.util
import os
import sys
import textwrap

import pytest
import torch

from gmlp_check.backends import (
    BUILTIN,
    PROTOCOL_METHODS,
    Backend,
    BackendEntry,
    BackendError,
    load,
    resolve,
)
from gmlp_check.fused.grouped_mm import TorchGroupedMMMLP
from gmlp_check.fused.mlp import TritonGroupedMLP

from ..fused.harness import Case, assert_outputs_match, run_pair

# Modules a third party might write, created for these tests in a temporary directory.
FACTORIES = '''
from gmlp_check.fused import TritonGroupedMLP


def wrapped_triton(**mlp_kwargs):
    """Takes refimpl.GroupedMLP's keyword arguments, returns a module."""
    return TritonGroupedMLP(**mlp_kwargs)


def not_a_module(**mlp_kwargs):
    return "not a module"


NOT_CALLABLE = 42
'''
BROKEN = "import a_module_that_does_not_exist  # its import fails\n"
EXAMPLE = "gmlp_test_example_backends"  # a package on sys.path for this module's tests
IN_CWD = "gmlp_test_cwd_backends"  # a package only in the working directory


def write_package(root, name: str) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "factories.py").write_text(textwrap.dedent(FACTORIES))
    (package / "broken.py").write_text(BROKEN)


def forget(name: str) -> None:
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


@pytest.fixture(scope="module", autouse=True)
def example_package(tmp_path_factory):
    root = tmp_path_factory.mktemp("backends")
    write_package(root, EXAMPLE)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        yield EXAMPLE
    forget(EXAMPLE)


def test_builtin_names_are_aliases_of_module_factory_specs():
    assert issubclass(BackendError, ValueError)
    assert load("triton").factory is TritonGroupedMLP
    assert load("torch-grouped-mm").factory is TorchGroupedMMMLP
    for name, entry in BUILTIN.items():
        assert resolve(name) == entry.target and entry.doc, name
        assert resolve(entry.target) == entry.target, name  # the target is itself a valid spec


def test_a_builtin_name_loads_through_the_spec_path(monkeypatch):
    entry = BackendEntry(f"{EXAMPLE}.factories:wrapped_triton", "an example", ("cpu",), ("fp32",))
    monkeypatch.setitem(BUILTIN, "example", entry)
    backend = load("example")
    assert backend.spec == "example"  # errors name what the user typed
    assert backend.factory is load(f"{EXAMPLE}.factories:wrapped_triton").factory


def test_module_factory_spec_builds_and_matches_reference():
    spec = f"{EXAMPLE}.factories:wrapped_triton"
    assert isinstance(load(spec).build(Case().config()), TritonGroupedMLP)
    ref, fused = run_pair(Case(), backend=spec)
    assert_outputs_match(ref, fused, torch.float32)


FORM = f"expected one of {', '.join(BUILTIN)} or a 'package.module:factory' string"


@pytest.mark.parametrize("spec", ["cuda", "a:b:c", "pkg.:factory", "pkg:", ":factory", None])
def test_a_spec_of_the_wrong_form_names_fused_and_the_expected_form(spec):
    with pytest.raises(BackendError) as err:
        load(spec)
    assert str(err.value) == f"--fused: {FORM}, got {spec!r}"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_package_xyz.mod:factory", "cannot import module 'no_such_package_xyz.mod'"),
        (f"{EXAMPLE}.broken:factory", "No module named 'a_module_that_does_not_exist'"),
        (f"{EXAMPLE}.factories:missing", "has no attribute 'missing'"),
        (f"{EXAMPLE}.factories:NOT_CALLABLE", "is a int, expected a callable factory"),
    ],
)
def test_a_spec_that_does_not_load_names_fused_the_spec_and_why(monkeypatch, spec, message):
    monkeypatch.setattr(sys, "path", list(sys.path))  # a failed import may append the cwd
    with pytest.raises(BackendError) as err:
        load(spec)
    assert str(err.value).startswith(f"--fused {spec}: ")
    assert message in str(err.value)


def test_a_factory_must_return_a_module():
    spec = f"{EXAMPLE}.factories:not_a_module"
    with pytest.raises(BackendError) as err:
        load(spec).build(Case().config())
    assert str(err.value) == (
        f"--fused {spec}: the factory returned str, expected a torch.nn.Module"
    )


def module_lacking(*missing: str, not_callable: tuple[str, ...] = ()) -> torch.nn.Module:
    """A module with the protocol's methods except ``missing``, and ``not_callable`` as
    plain values."""
    members = {m: (lambda self, *args: None) for m in PROTOCOL_METHODS if m not in missing}
    members.update({m: 42 for m in not_callable})
    return type("ThirdPartyMLP", (torch.nn.Module,), members)()


@pytest.mark.parametrize(
    ("missing", "not_callable"),
    [
        (("backward_dw",), ()),
        (("register_wgrad_accumulation_and_reduce_hooks",), ()),
        (PROTOCOL_METHODS, ()),
        ((), ("backward_dw",)),
    ],
    ids=["backward_dw", "register-hooks", "both", "backward_dw-not-callable"],
)
def test_a_module_lacking_a_protocol_method_is_refused_naming_it(missing, not_callable):
    module = module_lacking(*missing, not_callable=not_callable)
    backend = Backend("thirdparty.mlp:make", lambda **kwargs: module)
    with pytest.raises(BackendError) as err:
        backend.build(Case().config())
    message = str(err.value)
    assert message.startswith("--fused thirdparty.mlp:make: the module (ThirdPartyMLP) has no ")
    for method in PROTOCOL_METHODS:
        assert (f"{method}()" in message) is (method in missing or method in not_callable)


def test_a_module_with_the_protocol_is_returned_as_built():
    module = module_lacking()
    assert Backend("thirdparty.mlp:make", lambda **kwargs: module).build(Case().config()) is module


def test_an_unsupported_configuration_passes_through_as_not_implemented():
    """The checker reports NotImplementedError as a skip; a BackendError would be a usage
    error."""
    with pytest.raises(NotImplementedError) as err:
        load("torch-grouped-mm").build(Case(dtype=torch.float32, device="cpu").config())
    assert not isinstance(err.value, BackendError)


@pytest.fixture
def package_only_in_cwd(tmp_path, monkeypatch):
    """A package in the working directory, which is not on sys.path (as for console scripts,
    whose sys.path starts with the script's directory)."""
    write_package(tmp_path, IN_CWD)
    monkeypatch.chdir(tmp_path)
    here = {"", ".", str(tmp_path), os.path.realpath(tmp_path)}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in here])
    yield IN_CWD
    forget(IN_CWD)


def test_a_package_in_the_working_directory_loads_without_being_on_sys_path(
    package_only_in_cwd,
):
    assert importlib.util.find_spec(package_only_in_cwd) is None  # a plain import fails
    backend = load(f"{package_only_in_cwd}.factories:wrapped_triton")
    assert backend.factory.__module__ == f"{package_only_in_cwd}.factories"
    assert isinstance(backend.build(Case().config()), TritonGroupedMLP)
    assert sys.path[-1] == os.getcwd()  # appended last: it shadows nothing installed


@pytest.mark.parametrize("name", list(BUILTIN))
def test_an_entry_says_whether_its_backend_runs_on_the_cpu(name):
    """The entry's devices agree with the factory: it builds a CPU module, or refuses the CPU
    as an unsupported configuration (before needing anything the CPU lacks)."""
    config = Case(dtype=torch.float32, device="cpu").config()
    if "cpu" in BUILTIN[name].devices:
        assert isinstance(load(name).build(config), torch.nn.Module)
    else:
        with pytest.raises(NotImplementedError):
            load(name).build(config)
