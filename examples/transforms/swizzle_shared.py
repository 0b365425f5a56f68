"""Two versions of a bank-conflict swizzle for `ave fuzz` (docs/fuzzing.md).

    ave fuzz --transform examples/transforms/swizzle_shared.py:broken   # finds the bug
    ave fuzz --transform examples/transforms/swizzle_shared.py:correct  # finds nothing
"""
from ave_decl.transform.catalogue import xor_swizzle_shared, xor_swizzle_writes_only


def correct(module):
    """Swizzle every store *and* load of each shared tile: data moves, readers follow."""
    return xor_swizzle_shared(module)


def broken(module):
    """Deliberately broken: swizzles the stores into shared memory but not the loads."""
    return xor_swizzle_writes_only(module)
