"""The per-row integer keys `write_once_proved` compares (solver/lane_split.py): distinct rows get
distinct keys and equal rows equal ones, in the mixed-radix case and past 62 bits alike, so the
lane-enumeration proof counts the same distinct elements as np.unique over rows."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ave_decl.solver.lane_split import _row_keys

SCALES = st.sampled_from([1, 7, 1 << 20, 1 << 40])


@settings(max_examples=300, deadline=None)
@given(arrays(np.int64, st.tuples(st.integers(1, 40), st.integers(1, 4)), elements=st.integers(-6, 6)), SCALES)
def test_row_keys_count_the_distinct_rows(image, scale):
    image = image * scale
    lows = [int(v) for v in image.min(axis=0)]
    highs = [int(v) for v in image.max(axis=0)]
    keys = _row_keys(image, lows, highs)
    assert np.unique(keys).shape[0] == np.unique(image, axis=0).shape[0]
    for i in range(len(image)):  # equal keys exactly where the rows are equal
        assert ((keys == keys[i]) == (image == image[i]).all(axis=1)).all()
