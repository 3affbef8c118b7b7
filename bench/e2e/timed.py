"""What both benchmark jobs share: the subset they read and the timed training loop."""
import json
import time

import numpy as np


def subset(n, share, seed):
    """The job's item ids: a seeded random `share` of 0..n-1 (None: all), the same on both sides."""
    return None if share >= 1.0 else np.random.default_rng(seed).permutation(n)[: int(n * share)]


def run(loader, epochs, sleep_ms):
    """Iterates `epochs` passes ("training" = sleep_ms per batch); prints one JSON line:
    {"items", "seconds", "start", "end"} on the monotonic clock, shared by all processes."""
    start = time.monotonic()
    items = 0
    for _ in range(epochs):
        for _, labels in loader:
            items += len(labels)
            if sleep_ms:
                time.sleep(sleep_ms / 1000)
    end = time.monotonic()
    print(json.dumps({"items": items, "seconds": end - start, "start": start, "end": end}))
