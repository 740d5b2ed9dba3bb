import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from campaigns import build_rich  # noqa: E402

from engine import Workbench  # noqa: E402


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    """One rich campaign and its export, built once per module: (workbench path, campaign id, bundle path)."""
    folder = tmp_path_factory.mktemp("rich")
    wb = Workbench.open(folder / "source.db", background=False)
    camp = build_rich(wb)
    report = camp.export(folder / "rich.campaign.json")
    wb.close()
    return folder / "source.db", camp.id, report.path
