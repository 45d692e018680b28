"""``python -m agentfsm``: the ``agentfsm`` command.

Python puts the current folder first on ``sys.path``: run in a workspace, this imports a
``./agentfsm/`` package the model wrote instead of the installed one. Use the ``agentfsm``
console script there.
"""

from agentfsm.cli import main

raise SystemExit(main())
