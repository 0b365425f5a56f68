"""Batch audit of corpora (`ave audit`): per-file workers, deadlines, the result cache, Dask.

May import: `lang`, `datalog`, `report`, and the top-level `pipeline`.
"""
