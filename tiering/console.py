"""Where the commands print their tables: a terminal, or a file, pipe or CI log.

Failure mode this prevents: names cut short where nobody can widen the window. rich fits a
table to the console's width by shortening cells (``orde…``, ``leas…``); a terminal reports its
width, but anything else gets 80 columns, so a demo or a ``tiering status`` written to a log
lost the very names an operator greps for. Off a terminal the console is as wide as the widest
line: tables keep their natural width and lines are never wrapped or cropped.
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["output_console", "UNBOUNDED_WIDTH"]

#: wider than any table or line the commands print: rich shortens nothing below it
UNBOUNDED_WIDTH = 100_000


def output_console() -> Console:
    """A console for standard output: the terminal's width, or unbounded when not a terminal."""
    console = Console()
    return console if console.is_terminal else Console(width=UNBOUNDED_WIDTH)
