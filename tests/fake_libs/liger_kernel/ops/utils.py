import triton


def calculate_settings(n):
    block_size = triton.next_power_of_2(n)
    if block_size > 65536:
        raise RuntimeError(f"n = {n} exceeds the recommended Triton blocksize = 65536.")
    return block_size, 4
