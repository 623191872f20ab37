"""How a long-lived taskdesk process sets up Python's cyclic garbage collector (the web
process's requests; a bench row that runs the web's code in its own process sets it up alike).

The collector stalls every request in flight while it runs. Requests leave no cycles
(schema.executor), yet at the default threshold (700 net allocations) the objects of the 16
requests in flight set off ~36 young passes a second, each promoting them, and so a full pass over
the whole heap every few seconds (126-158 ms each under the trigger's load, measured). A young
pass every 10,000 allocations: about one every few seconds there.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def space_passes() -> None:
    """Young passes every YOUNG_THRESHOLD allocations (the older generations' defaults kept)."""
    gc.set_threshold(YOUNG_THRESHOLD, 10, 10)


def freeze_startup() -> None:
    """What start-up made (modules, the schema, the runtime's pools) lives as long as the
    process: out of every later pass, so a full one walks only what came since."""
    gc.collect()
    gc.freeze()
