"""pytest's entry point for an installed triton-cts (pyproject's ``pytest11`` entry).

The plugin (:mod:`triton_cts.plugin`) imports torch and Triton, seconds of start-up; this
module imports neither. It loads the plugin only for a run of a triton-cts checkout (the
run's rootdir holds ``triton_cts/`` and ``suites/``), early enough for the plugin's own
start-up hook (the default ``-n``). Any other pytest run in the same environment pays
nothing; ``-p triton_cts.plugin`` loads the plugin there all the same.
"""
from __future__ import annotations

from pathlib import Path

import pytest

PLUGIN = "triton_cts.plugin"


def is_checkout(folder) -> bool:
    """Whether ``folder`` is a triton-cts checkout."""
    folder = Path(folder)
    return (folder / "triton_cts" / "plugin.py").is_file() and (folder / "suites").is_dir()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args: list[str]) -> None:
    manager = early_config.pluginmanager
    if manager.has_plugin(PLUGIN) or not is_checkout(early_config.rootpath):
        return
    manager.import_plugin(PLUGIN)
    # registered during this hook, the plugin misses it: give it its turn
    hook = getattr(manager.get_plugin(PLUGIN), "pytest_load_initial_conftests", None)
    if hook is not None:
        hook(early_config=early_config, parser=parser, args=args)
