"""The package's version: one place, read by the build and by every part that reports it."""

__all__ = ["__version__"]

__version__ = "0.1.0.dev0"
