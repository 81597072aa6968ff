"""The op database.

- :mod:`~triton_cts.ops.spec`: :class:`OpSpec`, what an op is;
- :mod:`~triton_cts.ops.implementation`: :class:`Implementation`, who computes it;
- :mod:`~triton_cts.ops.registry`: ops and their implementations selectable in a run;
- :mod:`~triton_cts.ops.catalog`: every op, ``ALL_OPS``;
- one module per op family (``gelu``, ``layer_norm``, ``softmax``, ...) declaring its
  OpSpecs as ``OPS``;
- :mod:`~triton_cts.ops.dtypes`: the integer dtype of a width, a tensor's bits;
- :mod:`~triton_cts.ops.tolerances` (the tolerance policy) and
  :mod:`~triton_cts.ops.error_models` (the error any correct implementation may make
  where an op is ill-conditioned).
"""
