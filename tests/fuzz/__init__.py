"""The fuzz suite: random runs of ``run_conversation`` and ``Agent``, held event by event to
python-statemachine's engine, ten invariants on each."""
