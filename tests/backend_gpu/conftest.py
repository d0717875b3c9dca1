"""Fixtures of the GPU backend tests."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backend_gpu.fake_driver import FakeDriver
from xlc.backend_gpu import cuda


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeDriver]]:
    """Install a FakeDriver per executable (created lazily by `fake_driver.use`)."""
    holder: list[FakeDriver] = []
    monkeypatch.setattr(cuda, "_context", None)
    yield holder
