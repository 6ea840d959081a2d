"""Packaging: only ``equiv`` goes into site-packages.

The repository keeps ``reference/``, ``properties/`` and ``fixtures/`` at its top; installed they
are ``equiv.reference``, ``equiv.properties`` and ``equiv.fixtures`` (fixtures as package data).
Metadata lives in pyproject.toml; this file only computes the package list, so a new
sub-package is never left out of the wheel.
"""
from setuptools import find_packages, setup

MAPPED = ("reference", "properties", "fixtures")

packages = find_packages(include=["equiv", "equiv.*"])
package_dir = {}
for top in MAPPED:
    package_dir[f"equiv.{top}"] = top
    packages += [f"equiv.{top}"] + [f"equiv.{top}.{p}" for p in find_packages(top)]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "equiv.properties": ["*.json", "*.ini"],
        "equiv.fixtures": ["*.md", "adversarial/*.npy", "adversarial/*.json", "adversarial/*.py",
                           "traces/*.npz", "traces/*.md", "traces/*.py",
                           "prompts/*.json"],
        "equiv": ["py.typed"],
        "equiv.ops.draft_topk.report": ["templates/*"],
    },
)
