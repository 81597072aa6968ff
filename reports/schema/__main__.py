"""``python -m reports.schema``: write docs/report-format.md from the schemas."""
from reports.schema import PAGE, render
from triton_cts.results.report_io import atomic_write

if __name__ == "__main__":
    atomic_write(PAGE, render())
    print(f"wrote {PAGE}")
