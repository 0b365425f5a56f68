"""Two versions of a 2-stage software pipelining of the K loop, for `ave fuzz` (docs/fuzzing.md).

    ave fuzz --transform examples/transforms/pipeline_k_loop.py:broken   # finds the bug
    ave fuzz --transform examples/transforms/pipeline_k_loop.py:correct  # finds nothing
"""
from ave_decl.transform.catalogue import pipeline_k_loop, pipeline_k_loop_wrong_stage


def correct(module):
    """Fetch tile kt + step into the other stage with async copies while stage kt is multiplied."""
    return pipeline_k_loop(module)


def broken(module):
    """Deliberately broken: the multiply reads the stage that is being refilled (off by one stage)."""
    return pipeline_k_loop_wrong_stage(module)
