"""The fuzz suite: random runs of both drivers and ``Engine``, nine invariants on each."""
