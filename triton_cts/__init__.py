"""triton-cts harness: vendor profiles, op registry, execution modes and the pytest plugin.

The conformance content lives beside this package in the checkout:
``vendor_profiles/`` (data), ``kernels/`` (reference kernels), ``suites/`` (the suites)
and ``reports/`` (renderers). This package is the machinery that connects them.
"""
from pathlib import Path

__version__ = "0.1.0"

#: Root of the checkout (the folder holding vendor_profiles/, kernels/, suites/).
CHECKOUT = Path(__file__).resolve().parent.parent
#: Folder of the bundled vendor profiles.
PROFILE_DIR = CHECKOUT / "vendor_profiles"
