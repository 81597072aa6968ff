"""Third-party Triton kernel libraries, checked by the same suites as the reference kernels.

Each library has an adapter module here that maps its call signatures onto the ops': the
positional arguments ``OpSpec.make_args`` builds in, the op's outputs out. An adapter
module imports without its library (the library is imported when a check first calls
it) and declares:

- ``OPS``: op name -> adapter function name, only for ops the library has a kernel for
  (an op it lacks gets nothing: falling back to torch would test torch);
- ``OUTPUTS`` (optional): op name -> indices of the op's outputs the library computes,
  where it computes only some (``Implementation.outputs``);
- ``unsupported(op, mode, profile)`` (optional): why a mode cannot check the library's
  ``op`` for a profile even when it is installed (a Triton interpreter gap its kernel
  hits, say), or None.

Every library is registered under its name (``--impl liger``) whether or not it is
installed, so a run without it lists its checks as ``not supported: <library> is not
installed (pip install ...)`` instead of dropping them.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from typing import Iterable

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from triton_cts.ops.implementation import Implementation


@dataclass(frozen=True)
class Library:
    name: str           # the implementation name: --impl <name>
    module: str         # the package the adapter imports
    distribution: str   # its name on PyPI
    requirement: str    # the versions whose API the adapter maps
    adapter: str        # the adapter module

    @property
    def install(self) -> str:
        return f"pip install '{self.distribution}{self.requirement}'"

    def unsupported(self, op: str, mode: str, profile) -> str | None:
        """Why this library's ``op`` cannot be checked in ``mode`` for ``profile`` here,
        or None."""
        why = import_problem(self)
        if why is None:
            check = getattr(importlib.import_module(self.adapter), "unsupported", None)
            why = check(op, mode, profile) if check else None
        return why


LIBRARIES = (
    Library("liger", "liger_kernel", "liger-kernel", ">=0.8,<0.9", "triton_cts.adapters.liger"),
    Library("flag_gems", "flag_gems", "flag-gems", ">=5,<6", "triton_cts.adapters.flag_gems"),
)


@functools.cache
def import_problem(lib: Library) -> str | None:
    """Why ``lib`` cannot be used here (absent, an unmapped version, fails to import), or
    None. Imports it once per process, at collection, so the reason shows on every check."""
    if importlib.util.find_spec(lib.module) is None:
        return f"{lib.distribution} is not installed ({lib.install})"
    try:
        version = metadata.version(lib.distribution)
    except metadata.PackageNotFoundError:
        version = None  # importable from a source tree: no installed version to hold it to
    try:
        if version is not None and Version(version) not in SpecifierSet(lib.requirement):
            return (f"{lib.distribution} {version} is installed, but the adapter maps the API "
                    f"of {lib.distribution}{lib.requirement} ({lib.install})")
    except InvalidVersion:
        pass
    try:
        importlib.import_module(lib.module)
    except Exception as exc:  # a library may refuse to import without an accelerator
        message = " ".join(str(exc).split()) or "(no message)"
        return f"{lib.module} cannot be imported here: {type(exc).__name__}: {message}"
    return None


def implementations(known_ops: Iterable[str]) -> list[Implementation]:
    """Every library's implementations, installed or not, for the plugin to add to the
    registry (as it adds entry points'): the adapters never import the registry."""
    known = set(known_ops)
    impls = []
    for lib in LIBRARIES:
        adapter = importlib.import_module(lib.adapter)
        outputs = getattr(adapter, "OUTPUTS", {})
        for op, function in adapter.OPS.items():
            if op not in known:
                raise ValueError(f"adapter {lib.adapter} maps unknown op '{op}'; known ops: "
                                 f"{', '.join(sorted(known))}")
            impls.append(Implementation(lib.name, op, f"{lib.adapter}:{function}",
                                        outputs=outputs.get(op),
                                        unsupported=functools.partial(lib.unsupported, op)))
    return impls


def by_name(name: str) -> Library:
    for lib in LIBRARIES:
        if lib.name == name:
            return lib
    raise KeyError(f"unknown library '{name}'; known: {', '.join(l.name for l in LIBRARIES)}")
