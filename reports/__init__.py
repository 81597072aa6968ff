"""Report commands and renderers over triton-cts result JSON (``python -m reports``).

Used from the checkout; the record format and status model are in
``triton_cts/results.py``.
"""
