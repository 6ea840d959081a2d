"""The one place the version is written: pyproject.toml reads it, ``equiv --version`` prints it."""
__version__ = "0.1.0"
