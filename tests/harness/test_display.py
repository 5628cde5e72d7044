"""harness.display: a live status line on a terminal, plain lines (a progress line now and then) otherwise."""
import io

from tritondiff.harness import display as display_mod
from tritondiff.harness.display import Display, clock


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_display_live_on_a_terminal_plain_lines_otherwise(monkeypatch):
    live = Display(Tty(), None)
    live.status("[0:01/0:10] 3 examples")
    live.line("NEW finding")
    text = live.out.getvalue()
    assert text.startswith("\r\x1b[2K[0:01/0:10] 3 examples") and "\r\x1b[2KNEW finding\n" in text
    plain = Display(io.StringIO(), None)
    plain.status("progress 1")                          # too soon for a periodic progress line
    plain.line("NEW finding")
    monkeypatch.setattr(display_mod, "PLAIN_PROGRESS_S", 0.0)
    plain.status("progress 2")
    assert plain.out.getvalue() == "NEW finding\nprogress 2\n"


def test_clock_reads_minutes_and_hours():
    assert (clock(5), clock(65), clock(3725)) == ("0:05", "1:05", "1:02:05")
