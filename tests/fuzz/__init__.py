"""The fuzz suite: random runs of both drivers and ``Agent``, nine invariants on each."""
