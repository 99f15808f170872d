"""The package's version: the one place it is written (pyproject.toml and the User-Agent read
it from here)."""
__version__ = "0.3.0"
