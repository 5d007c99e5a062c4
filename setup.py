"""Packaging that pyproject.toml cannot express: one import namespace, ``gmlp_check``, over the
repository's top-level folders. The checker is ``gmlp_check/`` itself; the reference
(``refimpl/``), the fused path (``fused/``), the linter (``lint/``) and the benchmark
(``bench/``) install as its sub-packages. Sub-packages are found by walking the folders, so a
new one cannot be forgotten. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

NAMESPACE = "gmlp_check"
FOLDERS = {"refimpl": "refimpl", "fused": "fused", "lint": "lint", "bench": "bench"}

package_dir = {NAMESPACE: NAMESPACE}
packages = [NAMESPACE, *(f"{NAMESPACE}.{p}" for p in find_packages(NAMESPACE))]
for name, folder in FOLDERS.items():
    package_dir[f"{NAMESPACE}.{name}"] = folder
    packages.append(f"{NAMESPACE}.{name}")
    packages += [f"{NAMESPACE}.{name}.{p}" for p in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
