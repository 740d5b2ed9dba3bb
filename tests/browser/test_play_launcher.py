"""`make play` and `make lab`'s launcher, for real: the play page (Voila
serving notebooks/table.ipynb on loopback behind a token), and a JupyterLab
server on a free port whose root is the whole project and whose front page is
notebooks/play.ipynb."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def _started(tmp_path, *args: str, pattern: str):
    """scripts/play.py with the default port; stopped by its own process group id."""
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "IPYTHONDIR": str(tmp_path / "ipython"),
           "STORY_WORKBENCH_PLAY_DB": str(tmp_path / "play.db")}
    log = tmp_path / "play.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "play.py"), *args], cwd=tmp_path, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield _printed_url(log, server, pattern), server, log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(5)


@pytest.fixture
def launched(tmp_path):
    """`make lab`: JupyterLab at the play notebook."""
    with _started(tmp_path, "--lab", pattern=LAB_URL) as (url, server, log):
        _wait_until_serving(url, server, log)
        yield url


LAB_URL = r"http://127\.0\.0\.1:\d+/lab/tree/notebooks/play\.ipynb\?token=\S+"
PAGE_URL = r"http://127\.0\.0\.1:\d+/\?token=\S+"


def _printed_url(log: Path, server, pattern: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text())
        if found:
            return found.group(0)
        assert server.poll() is None, log.read_text()
        time.sleep(0.2)
    pytest.fail(f"no URL printed:\n{log.read_text()}")


def _wait_until_serving(url: str, server, log: Path) -> None:
    base, token = url.split("/lab/")[0], url.split("token=")[1]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"{base}/api/status", params={"token": token}, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not start:\n{log.read_text()[-3000:]}")


def test_play_serves_the_project_and_opens_the_play_notebook(launched):
    base, token = launched.split("/lab/")[0], launched.split("token=")[1]
    auth = {"Authorization": f"token {token}"}
    root = httpx.get(f"{base}/api/contents/", headers=auth, timeout=10).json()
    names = {item["name"] for item in root["content"]}
    assert {"README.md", "evidence", "notebooks", "engine"} <= names  # the whole project, not notebooks/
    front = httpx.get(f"{base}/", headers=auth, timeout=10, follow_redirects=False)
    assert front.status_code in (301, 302) and front.headers["location"].rstrip("?").endswith("/lab/tree/notebooks/play.ipynb")
    page = httpx.get(launched, timeout=10)
    assert page.status_code == 200 and "JupyterLab" in page.text


def test_a_second_play_takes_another_port(launched, tmp_path):
    """A port already in use (another project, or a running Jupyter) does not collide."""
    busy = int(launched.split(":")[2].split("/")[0])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] != busy
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "play.py"), "--lab", "--print-only"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert f"--port={busy}" not in out and "--ServerApp.port_retries=0" in out


def test_play_serves_the_table_page_on_loopback_behind_its_token(tmp_path):
    """`make play`: Voila serves the table notebook alone; without the token nothing is served."""
    with _started(tmp_path, pattern=PAGE_URL) as (url, server, log):
        base, token = url.split("/?token=")
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            try:
                page = httpx.get(url, timeout=60)
                if page.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        assert "voila" in page.text.lower() and "<title>table</title>" in page.text
        refused = httpx.get(f"{base}/", timeout=30, follow_redirects=False)
        assert refused.status_code in (302, 403) and "voila" not in refused.text.lower()
        port = int(base.rsplit(":", 1)[1])
        assert "--Voila.ip=127.0.0.1" in " ".join(_command_line(server.pid)) and port > 0


def _command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
