"""Fake liger_kernel: the API names the triton-cts adapter calls, computed with torch."""
