"""Fake flag_gems: the API names the triton-cts adapter calls, computed with torch."""
import os

if os.environ.get("FAKE_FLAG_GEMS_NO_DEVICE"):
    raise RuntimeError("No device were detected on your machine ! \n Please check that your "
                       "driver is complete. ")
