import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from narrators import BagOfWordsEmbedder, BlockingNarrator, CountingNarrator, FailingNarrator, ScriptedNarrator  # noqa: E402

from engine import Workbench


@pytest.fixture(autouse=True)
def fresh_query_vectors():
    """Each test starts with no query vectors held: test doubles share model
    ids (a failing embedder under a working one's id), and a vector kept from
    another test would hide a failure or an embedding call a test counts."""
    from engine.vectors import QUERIES

    QUERIES.clear()
    yield
    QUERIES.clear()


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "story.db"


@pytest.fixture
def narrator():
    return CountingNarrator()


@pytest.fixture
def wb(db_path, narrator):
    bench = Workbench.open(db_path, background=False)
    bench.configure(narrator=narrator, embedder=BagOfWordsEmbedder())
    yield bench
    bench.close()


@pytest.fixture
def camp(wb):
    return wb.new_campaign("Cave", premise="A cave by the sea.", protagonist="Ila",
                           opening="You stand at the mouth of a sea cave.")


__all__ = ["BagOfWordsEmbedder", "BlockingNarrator", "CountingNarrator", "FailingNarrator", "ScriptedNarrator"]


@pytest.fixture
def fake_server():
    from fake_server import FakeServer

    from engine.providers import window

    window.cache_clear()
    with FakeServer() as server:
        yield server
    window.cache_clear()


@pytest.fixture
def fresh(tmp_path):
    """An empty workbench to import into (bundle and interop tests share it)."""
    from bundle.campaigns import configure

    bench = Workbench.open(tmp_path / "fresh.db", background=False)
    configure(bench)
    yield bench
    bench.close()


@pytest.fixture
def counted(fresh):
    """(workbench, a function giving the census of its file)."""
    from bundle.campaigns import census

    return fresh, lambda: census(fresh.db.path)
