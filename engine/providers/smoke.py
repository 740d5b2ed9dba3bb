"""`python -m engine.providers.smoke`: can the embedded model generate here?

`make setup` ends with this, so a native build that does not suit this CPU
fails the set-up with a sentence, not a later test or a dead kernel. The model
runs in its own process, so a crash is reported rather than suffered.
"""
from __future__ import annotations

import sys
import time

__all__ = ["main"]


def main() -> int:
    from ..errors import WorkbenchError
    from .embedded import LocalNarrator, unportable_features

    started = time.perf_counter()
    try:
        narrator = LocalNarrator()
        ok, detail = narrator.check()
    except WorkbenchError as exc:
        ok, detail = False, str(exc)
    if ok:
        # Generating here proves little about another CPU: the build must also
        # use nothing this machine has that another may not allow.
        tuned = unportable_features(narrator.worker.info.get("system_info", ""))
        if tuned:
            ok, detail = False, (f"llama-cpp-python was built for this CPU ({', '.join(tuned)} compiled in), so it "
                                 "can crash on another machine; the portable build has none of these")
    if ok:
        print(f"Embedded model check: {detail} ({time.perf_counter() - started:.1f} s).")
        return 0
    print(
        "\nThe embedded model cannot generate on this machine.\n"
        f"  {detail}\n"
        "What to do: run `make clean setup` to rebuild llama-cpp-python portably (AVX2, no CPU-specific\n"
        "paths). If it still fails, this CPU may lack AVX2: set STORY_WORKBENCH_LLAMA_FLAGS to\n"
        "'-DGGML_NATIVE=OFF -DGGML_AVX2=OFF' and run `make clean setup`; or use your own server with\n"
        "wb.configure(endpoint=..., model=...), which needs no native build here.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
