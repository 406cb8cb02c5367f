"""`pytest docs`: every `$ fabric ...` block of these pages runs (tests/docs/transcripts.py explains how)."""

from __future__ import annotations

import sys
from pathlib import Path

from sybil import Sybil
from sybil.parsers.markdown import SkipParser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.docs...` from any cwd

from tests.docs.transcripts import TranscriptParser, document_namespace

pytest_collect_file = Sybil(
    parsers=[SkipParser(), TranscriptParser()], patterns=["*.md"], setup=document_namespace
).pytest()
