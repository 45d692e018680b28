"""``python -m agentfsm``: the ``agentfsm`` command."""

from agentfsm.cli import main

raise SystemExit(main())
