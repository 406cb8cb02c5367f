"""The spinner stops drawing the moment Ctrl-C is pressed (issue 41 point 11: an ingest's spinner kept spinning
for the seconds its DuckDB rollback took after Ctrl-C)."""

from __future__ import annotations

import io
import time

from llm_fabric.cli import main as cli_main
from llm_fabric.cli import output
from llm_fabric.cli.output import FabricConsole

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots"


def test_a_spinner_draws_nothing_once_interrupted() -> None:
    sink = io.StringIO()
    console = FabricConsole(file=sink, force_terminal=True, width=80)
    assert cli_main._sigint is output.interrupted  # the CLI's SIGINT handler sets what the spinner reads
    try:
        with console.status("ingesting", spinner="dots") as status:
            time.sleep(0.3)
            assert any(frame in sink.getvalue() for frame in FRAMES)  # it spins
            output.interrupted.set()  # what the SIGINT handler does, before the work below unwinds
            drawn = len(sink.getvalue())
            time.sleep(0.1)  # one refresh (12.5 a second) blanks the line
            blanked = len(sink.getvalue())
            status.update("rolling back")
            time.sleep(0.5)  # the rollback: the spinner would redraw a frame every 80 ms
            after = sink.getvalue()[blanked:]
        assert blanked >= drawn
        assert not any(frame in after for frame in FRAMES), repr(after)
        assert "rolling back" not in after
    finally:
        output.interrupted.clear()
