"""A garbage-collector probe for a `herd serve` started by a bench (docs/benchmarks.md, "The garbage collector"):

    PYTHONPATH=bench/gcprobe [HERD_GC_THRESHOLD=10000,50,10] [HERD_GC_FREEZE_EVERY=5] \\
        .venv/bin/python bench/bench_consumer_groups.py ...

Python imports `sitecustomize` at start-up from the path, so every Python process of the bench loads this module;
it does something only in a process whose arguments include `serve`. There it times every collection through
`gc.callbacks` and appends, every second, the collections and their total milliseconds per generation to
$HERD_GC_PROBE_DIR/gc-<pid>.log (default /tmp). HERD_GC_THRESHOLD sets `gc.set_threshold`; HERD_GC_FREEZE_EVERY
calls `gc.freeze()` every that many seconds. For measuring only: herd itself sets neither.
"""

import gc
import os
import sys
import threading
import time

if "serve" in sys.argv:
    if os.environ.get("HERD_GC_THRESHOLD"):
        gc.set_threshold(*map(int, os.environ["HERD_GC_THRESHOLD"].split(",")))
    _state = {"start": 0.0, "ms": [0.0, 0.0, 0.0], "n": [0, 0, 0]}

    def _timed(phase: str, info: dict) -> None:
        if phase == "start":
            _state["start"] = time.perf_counter()
        else:
            generation = info["generation"]
            _state["ms"][generation] += (time.perf_counter() - _state["start"]) * 1000
            _state["n"][generation] += 1

    gc.callbacks.append(_timed)

    def _report() -> None:
        path = os.path.join(os.environ.get("HERD_GC_PROBE_DIR", "/tmp"), f"gc-{os.getpid()}.log")
        freeze_every = float(os.environ.get("HERD_GC_FREEZE_EVERY", "0"))
        frozen_at = time.monotonic()
        while True:
            time.sleep(1)
            if freeze_every and time.monotonic() - frozen_at >= freeze_every:
                gc.freeze()
                frozen_at = time.monotonic()
            with open(path, "a") as out:
                out.write(f"{time.time():.1f} collections={_state['n']} ms={[round(x, 1) for x in _state['ms']]}\n")

    threading.Thread(target=_report, name="gc-probe", daemon=True).start()
