"""`pytest README.md`: the README's `$ fabric ...` blocks run like those of docs/ (docs/conftest.py and
tests/docs/transcripts.py); this file collects only the top-level README.md."""

from __future__ import annotations

from sybil import Sybil
from sybil.parsers.markdown import SkipParser
from tests.docs.transcripts import TranscriptParser, document_namespace

pytest_collect_file = Sybil(
    parsers=[SkipParser(), TranscriptParser()],
    patterns=["README.md"],
    excludes=["*/README.md"],
    setup=document_namespace,
).pytest()
