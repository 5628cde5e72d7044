"""Progress on the command line: a live status line on a terminal, plain lines (and a progress line now
and then) otherwise."""
from __future__ import annotations

import shutil
import time
from typing import TextIO

PLAIN_PROGRESS_S = 30.0        # progress line period when the output is not a terminal


class Display:
    """A live status line on a terminal; plain lines (and a progress line now and then) otherwise."""

    def __init__(self, out: TextIO, live: bool | None):
        self.out = out
        self.live = bool(getattr(out, "isatty", lambda: False)()) if live is None else live
        self._shown = False
        self._last_plain = time.monotonic()

    def line(self, text: str) -> None:
        if self._shown:
            self.out.write("\r\x1b[2K")
            self._shown = False
        self.out.write(text + "\n")
        self.out.flush()

    def status(self, text: str) -> None:
        if self.live:
            width = shutil.get_terminal_size((120, 24)).columns
            self.out.write("\r\x1b[2K" + text[:max(20, width - 1)])
            self.out.flush()
            self._shown = True
        elif time.monotonic() - self._last_plain >= PLAIN_PROGRESS_S:
            self._last_plain = time.monotonic()
            self.line(text)

    def close(self) -> None:
        if self._shown:
            self.out.write("\r\x1b[2K")
            self.out.flush()
            self._shown = False


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"
