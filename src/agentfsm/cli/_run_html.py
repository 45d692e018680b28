"""``render_run``: one self-contained HTML file picturing a recorded run.

The page holds the machine's drawing (:mod:`._run_svg`), the run's data as one
``<script type="application/json">`` block and a small script that marks the path on the
drawing and lists the turns. Nothing is fetched when it is viewed (a Content-Security-Policy
forbids any network use) and nothing from the session is ever parsed as markup: the data is
JSON with ``<``, ``>``, ``&`` and U+2028/U+2029 escaped, and the script sets text with
``textContent`` only.
"""

from __future__ import annotations

import json
import os
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from ._output_file import write_whole
from ._run_svg import machine_svg
from ._run_view import read_run_view

__all__ = ["CSP", "attach_picture", "page_html", "render_run"]

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
"""The page's Content-Security-Policy: inline script and style, no network."""


def _asset(name: str) -> str:
    return resources.files("agentfsm.cli").joinpath(name).read_text("utf-8")


_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
"""The bidirectional embedding, override and isolate controls: shown, never obeyed."""


def _bidi_shown(data: Any) -> Any:
    """``data`` with every bidirectional control in its strings (keys too: a verdict's label
    is one) written as ``<U+202E>`` (as the terminal shows them): model text cannot reorder
    what the page shows."""
    if isinstance(data, str):
        return _BIDI.sub(lambda match: f"<U+{ord(match.group()):04X}>", data)
    if isinstance(data, dict):
        return {_bidi_shown(key): _bidi_shown(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_bidi_shown(value) for value in data]
    return data


def _json_block(data: Any) -> str:
    """``data`` as JSON that cannot end the ``<script>`` element holding it (ASCII only, so
    lone surrogates and U+2028/U+2029 are escapes too), bidi controls made visible."""
    text = json.dumps(_bidi_shown(data), ensure_ascii=True, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def page_html(view: dict[str, Any]) -> str:
    """The page for a view built by :func:`~._run_view.read_run_view`."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<link rel="icon" href="data:,">\n'
        "<title>agentfsm run</title>\n"
        f"<style>\n{_asset('_run_page.css')}</style>\n"
        "</head><body>\n"
        '<header><h1>agentfsm run</h1><dl id="summary"></dl></header>\n'
        '<main><section id="diagram">\n'
        f"{machine_svg()}\n"
        '</section><section id="right"><div id="timeline">'
        '<div id="pager"><button id="prev" type="button">\u2190 earlier</button>'
        '<span id="page"></span><button id="next" type="button">later \u2192</button></div>'
        '<ol id="turns"></ol></div><div id="detail"></div></section></main>\n'
        f'<script type="application/json" id="run-data">{_json_block(view)}</script>\n'
        f"<script>\n{_asset('_run_page.js')}</script>\n"
        "</body></html>\n"
    )


def render_run(session_path: str | Path, out: str | Path | None = None) -> str:
    """One self-contained HTML page picturing the recorded session ``session_path``.

    The page shows the agent loop's diagram with the path the session's runs took drawn
    over it (each edge taken and how often, the state where the last run ended, policy
    verdicts on the edges where they fired), a timeline of turns (tokens, duration, tool
    calls with their outcome, compressions, reminders, warnings, stops), and on demand each
    message and tool result, as text. A session that was resumed (``--resume``) is shown
    with the sessions it continued, as one timeline. It needs no network when viewed and
    runs nothing from the session: model text shows as text.

    Returns the HTML; with ``out``, also writes it there (UTF-8), whole or not at all: a
    symlink is written through to its target; a device, FIFO, socket or folder is refused
    with an ``OSError`` naming ``out``. Raises like
    :func:`~agentfsm.adapters.sessions.read_session_messages` when ``session_path`` cannot
    be read (``FileNotFoundError``, :class:`~agentfsm.adapters.sessions.SessionNotFound`).
    """
    page = page_html(read_run_view(session_path))
    if out is not None:
        write_whole(out, page)  # a full disk leaves no empty or cut picture behind
    return page


def attach_picture(end: dict[str, Any], out: str | None, *, beside_session: bool = False) -> None:
    """Write the picture of the run's session to ``out`` (``agentfsm run --html FILE``), or,
    with ``beside_session``, beside the session file (``<session>.html``, in the session
    folder, out of the model's reach), and add its absolute path to the ``run_end`` object
    ``end`` (``html_path``), which the summary prints. A picture that cannot be written is
    reported on stderr and leaves the run's exit code alone."""
    session = end.get("session_path")
    if not session or not (out or beside_session):
        return
    if not out and end.get("session_error"):
        return  # the session folder just refused a write: no second complaint about it
    target = os.path.abspath(out if out else Path(session).with_suffix(".html"))
    try:
        render_run(session, target)
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        from ._terminal import sanitize

        print(
            f"agentfsm: picture not written to {sanitize(target)[:200]!r}: "
            f"{sanitize(str(reason))[:300]}",
            file=sys.stderr,
        )
        return
    end["html_path"] = target
