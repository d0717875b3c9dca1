"""Shared test fixtures: the corpus location, verification on everywhere."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("XLC_CORPUS", ROOT.parent / "shared" / "corpus"))
sys.path.insert(0, str(CORPUS))

os.environ.setdefault("XLC_FLAGS", "--verify")


def corpus_available() -> bool:
    return (CORPUS / "cases").is_dir()


requires_corpus = pytest.mark.skipif(not corpus_available(), reason="../shared/corpus missing")


def corpus_cases(include_benchmarks: bool = True) -> list[str]:
    if not corpus_available():
        return []
    from corpus import case_names  # type: ignore[import-not-found]

    return case_names(include_benchmarks)
