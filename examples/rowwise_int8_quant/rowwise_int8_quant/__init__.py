"""Row-wise int8 quantization with per-row scales: ``q, scale = quantize(x)`` with
``scale = max|x_row| / 127`` (float32) and ``q = round(x / scale)`` (int8, halves away
from zero; rows of zeros give scale 0 and q 0), the format of W8A8 and int8 KV caches."""
from rowwise_int8_quant.kernel import quantize

__all__ = ["quantize"]
