"""The adapters' tests run on the event loops production runs: `taskdesk serve` runs under
uvicorn, whose default loop ("auto") is uvloop (uvicorn[standard] installs it), and the worker
runs arq under asyncio's own loop (`asyncio.run` in jobs/worker.py). A private part can behave
differently on each (uvloop's transports are not asyncio's), so every test here runs on both.

pytest-asyncio's loop-factory hook parametrizes each async test in this directory by loop; its
async fixtures run on the test's loop."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
import uvloop
from pytest_asyncio.plugin import LoopFactory

LOOPS: dict[str, LoopFactory] = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory]:
    return LOOPS
