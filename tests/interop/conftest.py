import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bundle"))

from campaigns import census, configure  # noqa: E402

from engine import Workbench  # noqa: E402


@pytest.fixture
def fresh(tmp_path):
    """An empty workbench to import into."""
    wb = Workbench.open(tmp_path / "fresh.db", background=False)
    configure(wb)
    yield wb
    wb.close()


@pytest.fixture
def counted(fresh):
    """(workbench, a function giving the census of its file)."""
    return fresh, lambda: census(fresh.db.path)
