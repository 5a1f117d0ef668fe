"""The command line: ``assembler`` and its commands, thin over the typed Python API."""

from assembler.cli.main import main

__all__ = ["main"]
