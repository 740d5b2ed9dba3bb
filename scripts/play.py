"""`make play`: the player's table as a page of its own, served by Voila on a
free loopback port with a token; `make lab` (--lab): JupyterLab on a free
loopback port, opened at notebooks/play.ipynb, the whole project in the file
browser.

The page is notebooks/table.ipynb run by Voila: only the app shows (no code
cells, no kernel menus or dialogs), and a reload runs it again in a fresh
kernel, which reopens the newest campaign of the file where it was left.

The tracked notebooks stay clean while they are played in JupyterLab: the
server saves any notebook under notebooks/ as its sources only
(widgets/notebook_files.py), so autosave never writes outputs or widget state
into git's copy. The campaign file lives outside the project, in
~/.local/share/story-workbench/play.db ($XDG_DATA_HOME respected; --db or
$STORY_WORKBENCH_PLAY_DB choose another), so play.db and its -wal and -shm
never sit beside the notebooks. A play.db left in notebooks/ by an older
version is moved there once.

    python scripts/play.py [--lab] [--port N] [--db PATH] [--print-only]
"""
from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/play.ipynb"
PAGE = "notebooks/table.ipynb"
HOOK = "widgets.notebook_files.keep_sources_only"
DB_ENV = "STORY_WORKBENCH_PLAY_DB"  # widgets.live.PLAY_DATABASE_ENV; read by the play notebook's kernel
OLD_DB = ROOT / "notebooks" / "play.db"


def database(chosen: str = "") -> Path:
    """The campaign file: --db, else $STORY_WORKBENCH_PLAY_DB, else the user's data folder."""
    chosen = chosen or os.environ.get(DB_ENV, "")
    if chosen:
        return Path(chosen).expanduser().resolve()
    home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return home / "story-workbench" / "play.db"


def move_old_database(target: Path, old: Path = OLD_DB) -> bool:
    """An older version kept play.db in notebooks/: move it (with -wal, -shm) once, if nothing is there yet."""
    if not old.exists() or target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(old) + suffix)
        if part.exists():
            os.replace(part, str(target) + suffix)
    return True


def free_port() -> int:
    """A port nobody is listening on now; the server is told not to wander from it,
    so the URL printed below is the one it serves."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(port: int, token: str) -> list[str]:
    jupyter = Path(sys.executable).parent / "jupyter"
    args = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}",
            f"--ServerApp.default_url=/lab/tree/{NOTEBOOK}", f"--LabApp.default_url=/lab/tree/{NOTEBOOK}",
            f"--FileContentsManager.pre_save_hook={HOOK}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")  # containers run as root
    return args


def page_command(port: int, token: str) -> list[str]:
    """Voila serving the table notebook alone, on loopback, behind the token."""
    voila = Path(sys.executable).parent / "voila"
    return [str(voila), str(ROOT / PAGE), "--no-browser", "--Voila.ip=127.0.0.1", f"--port={port}",
            "--Voila.port_retries=0", f"--token={token}", "--theme=light",
            "--VoilaConfiguration.show_tracebacks=False"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="a fixed port (default: any free one)")
    parser.add_argument("--db", default="", help="the campaign file (default: ~/.local/share/story-workbench/play.db)")
    parser.add_argument("--print-only", action="store_true", help="print the command and URL, start nothing")
    parser.add_argument("--lab", action="store_true", help=f"JupyterLab at {NOTEBOOK} instead of the play page")
    options = parser.parse_args(argv)
    port, token = options.port or free_port(), secrets.token_urlsafe(24)
    db = database(options.db)
    if options.lab:
        args = command(port, token)
        url = f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}"
        what = f"it opens {NOTEBOOK}; Ctrl-C here stops JupyterLab"
    else:
        args = page_command(port, token)
        url = f"http://127.0.0.1:{port}/?token={token}"
        what = "the player's table; reload it any time, the campaign stays. Ctrl-C here stops it"
    print(f"\nOpen this in your browser ({what}):\n\n    {url}\n\n"
          f"Your campaign is kept in {db}\n", flush=True)
    if options.print_only:
        print(" ".join(args))
        return
    if move_old_database(db):
        print(f"Moved the campaign file from {OLD_DB} to {db}.", flush=True)
    db.parent.mkdir(parents=True, exist_ok=True)
    os.environ[DB_ENV] = str(db)
    os.chdir(ROOT)
    os.execv(args[0], args)


if __name__ == "__main__":
    main()
