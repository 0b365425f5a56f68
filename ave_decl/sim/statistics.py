"""Row statistics in the shadow tags (docs/architecture.md, "Statistics are tags with a dropped
component"). A statistic's shadow tag holds its row (the reduced values' tag without the dropped
component) in its first components with a negative arity, and the position of the dropped
component in the last shadow slot, which a row never uses (a row has at most LMAX - 1
components). Keeping the position is what lets a statistic of the (head, query) row reduced
over the key be matched against scores tagged (head, key, query) as well as (head, query, key)."""
from __future__ import annotations

import numpy as np

from .state import ITYPE, LMAX

DROP = LMAX - 1  # the shadow slot of a statistic's dropped position
_IDX = np.arange(LMAX)


def reduce_rows(tag: np.ndarray, arity: np.ndarray, drops: int) -> tuple[np.ndarray, np.ndarray]:
    """The statistic a reduction makes of each element: a full tag loses component `drops`
    (negative: from the end) and records its position; a statistic stays itself (it is one row's
    already); Top stays Top, and so does a full tag without that component (the static side
    reports it UNKNOWN)."""
    full = arity > 0
    pos = np.where(drops >= 0, drops, arity + drops).astype(ITYPE)
    ok = full & (pos >= 0) & (pos < arity)
    src = np.clip(_IDX + (_IDX >= pos[..., None]), 0, LMAX - 1)
    row = np.where(_IDX < (arity - 1)[..., None], np.take_along_axis(tag, src, axis=-1), 0)
    row_ar = np.where(ok, -(arity - 1), 0).astype(ITYPE)
    row[..., DROP] = np.where(row_ar < 0, pos, 0)
    stat = arity < 0
    out_tag = np.where(stat[..., None], tag, np.where(ok[..., None], row, 0))
    return out_tag.astype(ITYPE, copy=False), np.where(stat, arity, row_ar).astype(ITYPE)


def matches_row(stat_tag: np.ndarray, stat_ar: np.ndarray, tag: np.ndarray, arity: np.ndarray) -> np.ndarray:
    """Whether each statistic belongs to the value it meets: a full value's tag without the
    component the statistic dropped starts with the statistic's row; another statistic is the
    same row, having dropped the same component."""
    n = -stat_ar
    pos = stat_tag[..., DROP]
    src = np.clip(_IDX + (_IDX >= pos[..., None]), 0, LMAX - 1)
    row = np.take_along_axis(tag, src, axis=-1)
    prefix = np.all(np.where(_IDX < n[..., None], stat_tag == row, True), axis=-1)
    of_full = (arity > n) & (pos < arity) & prefix
    of_stat = (arity == stat_ar) & np.all(stat_tag == tag, axis=-1)
    return np.where(arity > 0, of_full, of_stat)


def without_position(tag: np.ndarray, arity: np.ndarray) -> np.ndarray:
    """Shadow tags with a statistic's dropped position cleared: what a stored tag or an
    `assert_tag_eq` compares (the row's components only, as on the static side)."""
    return np.where(((arity < 0)[..., None]) & (_IDX == DROP), 0, tag)


def along_axis(rows: np.ndarray, row_ar: np.ndarray, lead: tuple[int, ...], groups: tuple[int, int, int]
               ) -> tuple[np.ndarray, ...]:
    """A reduction along one axis of a register array (`m = reduce_max(s, axis=a)`), its slots
    grouped as (outer, n, inner) with n the axis: whether each slot holds the row of the first slot
    of its group (ave/row-statistics), that first row per slot (what it is compared with), and the
    rows of the output slots (outer * inner of them)."""
    outer, n, inner = groups
    r = rows.reshape(lead + (outer, n, inner, LMAX))
    ra = row_ar.reshape(lead + (outer, n, inner))
    first, first_ar = r[..., :1, :, :], ra[..., :1, :]
    holds = (ra == first_ar) & np.all(r == first, axis=-1)
    size = outer * n * inner
    return (holds.reshape(lead + (size,)), np.broadcast_to(first, r.shape).reshape(lead + (size, LMAX)),
            np.broadcast_to(first_ar, ra.shape).reshape(lead + (size,)), first.reshape(lead + (outer * inner, LMAX)),
            first_ar.reshape(lead + (outer * inner,)))
