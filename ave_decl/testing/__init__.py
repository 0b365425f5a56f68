"""Tools for users who test kernel transformations: Hypothesis strategies, a transformation
catalogue and mutation operators, and the `ave fuzz` runner."""
