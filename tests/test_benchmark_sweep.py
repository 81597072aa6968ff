"""The sweep's command line: settings and shapes parse, bad ones are refused by name."""
import argparse

import pytest

from benchmarks import cases
from benchmarks.sweep import parse_settings, parse_shape, parse_size, sweep_cases


def test_a_field_named_twice_is_one_axis_with_two_values():
    axes = parse_settings(["launch.max_fused_size_bytes=32768", "io.load=select",
                           "launch.max_fused_size_bytes=65536",
                           "launch.num_warps_by_block=[[2048, 4], [8192, 8]]"])
    assert axes == {"launch.max_fused_size_bytes": [32768, 65536], "io.load": ["select"],
                    "launch.num_warps_by_block": [[[2048, 4], [8192, 8]]]}


@pytest.mark.parametrize("bad", ["launch.max_fused_size_bytes", "=3"])
def test_a_setting_without_field_or_value_is_refused(bad):
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        parse_settings([bad])


def test_shapes():
    assert parse_shape("4096x1024") == (4096, 1024)
    for bad in ("4096", "0x5", "ax3"):
        with pytest.raises(argparse.ArgumentTypeError, match="shape"):
            parse_shape(bad)


def test_matmul_is_swept_at_sizes_and_memory_ops_at_shapes():
    assert sweep_cases(["matmul", "gelu"], [(8, 16)], [4096]) == [("matmul", (4096,)),
                                                                  ("gelu", (8, 16))]
    defaults = sweep_cases(["matmul", "rms_norm"], None, None)
    assert defaults == ([("matmul", (n,)) for n in cases.MATMUL_SIZES]
                        + [("rms_norm", s) for s in cases.MEMORY_SHAPES])
    assert parse_size("8192") == 8192
    for bad in ("0", "4096x4096", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="matmul size"):
            parse_size(bad)


def test_the_llm_row_ops_are_swept_at_shapes_and_others_refused(capsys):
    """The fused add + RMS norm, SwiGLU and GEGLU take --shape as their rows; an op the
    sweep cannot time (cross-entropy at its vocabulary) is refused by argparse by name."""
    from benchmarks.sweep import main
    assert sweep_cases(["fused_add_rms_norm"], [(64, 4096)], None) == [
        ("fused_add_rms_norm", (64, 4096))]
    with pytest.raises(ValueError, match="not 'cross_entropy'"):
        sweep_cases(["cross_entropy"], [(8, 16)], None)
    with pytest.raises(SystemExit):
        main(["--op", "cross_entropy"])
    assert "invalid choice: 'cross_entropy'" in capsys.readouterr().err
