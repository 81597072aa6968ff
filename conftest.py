"""Root conftest: loads the triton-cts pytest plugin when it is not installed as an entry
point (``pip install -e .`` registers it under the same name, so it loads once)."""
pytest_plugins = ["triton_cts.plugin"]
