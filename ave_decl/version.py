"""The package version (its own module so that every layer may import it without importing the API)."""

__version__ = "0.1.0"
