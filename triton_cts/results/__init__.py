"""Results: one record per check, and what is made of the records.

- :mod:`~triton_cts.results.status`: the status model and pytest outcome classification;
- :mod:`~triton_cts.results.records`: the record, the op x profile matrix, the verdict;
- :mod:`~triton_cts.results.expectations`: expectation files and shards;
- :mod:`~triton_cts.results.report_io`: the report document, its validation and writes;
- :mod:`~triton_cts.results.plugin`: the pytest plugin that builds records and writes
  the outputs (JSON, HTML, the terminal matrix).
"""
