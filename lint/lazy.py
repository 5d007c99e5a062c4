"""Stand-ins for modules that are imported on first use.

A rule module holds both its documentation (read by ``gmlp-lint rule``, the SARIF reporter
and the configuration checks, none of which may pay for the parser) and its check (which
needs libcst). So a rule module binds libcst and the analysis modules to stand-ins: the real
module is imported on the first attribute look-up, and every attribute looked up is kept on
the stand-in, so later look-ups cost what a module attribute costs.
"""

from __future__ import annotations

from importlib import import_module


class LazyModule:
    def __init__(self, name: str, package: str | None = None) -> None:
        self._name = name  # as for importlib.import_module: relative to ``package`` when
        self._package = package  # it starts with a dot

    def __getattr__(self, attr: str):
        # Only reached for attributes not kept yet. Private and special names are never
        # forwarded: copy and pickle probe them on instances whose __init__ has not run.
        if attr.startswith("_"):
            raise AttributeError(attr)
        value = getattr(import_module(self._name, self._package), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<LazyModule {self._name!r}>"
