"""The console script's first code: a Ctrl-C that arrives while the CLI is still being imported.

Importing click, rich and the command table takes a few tenths of a second; a SIGINT in that window
would otherwise print the interpreter's KeyboardInterrupt traceback from inside an import. So the
handler is installed when this module is imported, before anything else of fabric: until `main.run`
installs its own, an interrupt ends the process quietly with the code `main` gives one (130), since
nothing has been read or written yet. What stays uncovered is the interpreter's own start-up before
this line (a few tens of milliseconds). Only the console script imports this module; importing `main`
(the tests' CliRunner does) installs no handler.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130  # errors.EXIT_INTERRUPTED: not imported, so the handler is in place sooner


def _quiet_exit(signum: int, frame: FrameType | None) -> None:
    os.write(sys.stderr.fileno(), b"interrupted\n")
    os._exit(EXIT_INTERRUPTED)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored (nohup, &)
    signal.signal(signal.SIGINT, _quiet_exit)


def run() -> None:
    from llm_fabric.cli import main

    if signal.getsignal(signal.SIGINT) is _quiet_exit:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # main.run replaces only the default one
    main.run()
