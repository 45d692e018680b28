"""``replay-vcr``'s second reading of a recorded response (see :mod:`._read`)."""

from ._common import Answer, Call, Failure, Reading, WireName, sse_events
from ._read import read_recorded

__all__ = ["Answer", "Call", "Failure", "Reading", "WireName", "read_recorded", "sse_events"]
