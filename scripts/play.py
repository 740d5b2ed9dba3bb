"""`make play`: JupyterLab on a free loopback port, opened at notebooks/play.ipynb,
with the whole project in the file browser.

The tracked notebooks stay clean while they are played: the server saves any
notebook under notebooks/ as its sources only (widgets/notebook_files.py), so
autosave never writes outputs or widget state into git's copy.

    python scripts/play.py [--port N] [--print-only]
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
HOOK = "widgets.notebook_files.keep_sources_only"


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="a fixed port (default: any free one)")
    parser.add_argument("--print-only", action="store_true", help="print the command and URL, start nothing")
    options = parser.parse_args(argv)
    port, token = options.port or free_port(), secrets.token_urlsafe(24)
    args = command(port, token)
    url = f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}"
    print(f"\nOpen this in your browser (it opens {NOTEBOOK}; Ctrl-C here stops JupyterLab):\n\n    {url}\n",
          flush=True)
    if options.print_only:
        print(" ".join(args))
        return
    os.chdir(ROOT)
    os.execv(args[0], args)


if __name__ == "__main__":
    main()
