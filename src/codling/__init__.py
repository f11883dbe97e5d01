"""codling: a coding agent for ACP editors and the terminal."""

__version__ = "0.1.0"
