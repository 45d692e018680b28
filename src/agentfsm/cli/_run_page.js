// The run picture's script: reads the JSON block, marks the machine drawing, and shows the
// timeline page by page and one turn's messages on demand. Every text from the session is
// set with textContent (never innerHTML): model text stays text.
(function () {
  "use strict";
  var PAGE = 50;
  var data = JSON.parse(document.getElementById("run-data").textContent);
  var turns = data.turns;
  var messages = data.messages;
  var page = 0;
  var selected = null;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function each(list, fn) {
    for (var i = 0; i < list.length; i++) fn(list[i], i);
  }

  function byAttr(selector, name, value) {
    var found = null;
    each(document.querySelectorAll(selector), function (node) {
      if (node.getAttribute(name) === value) found = node;
    });
    return found;
  }

  function num(value) {
    return typeof value === "number" ? value.toLocaleString("en") : "?";
  }

  function seconds(ms) {
    return ms === null || ms === undefined ? "" : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  }

  // --- the machine drawing ---
  function markDiagram() {
    var visited = {};
    Object.keys(data.edges).forEach(function (key) {
      var edge = byAttr("#machine g.edge", "data-edge", key);
      if (!edge) return;
      edge.classList.add("taken");
      edge.querySelector("text.count").textContent = "\u00d7" + data.edges[key];
      var parts = key.split(">");
      visited[parts[0]] = true;
      visited[parts[1]] = true;
    });
    Object.keys(data.verdicts).forEach(function (key) {
      var edge = byAttr("#machine g.edge", "data-edge", key);
      if (!edge) return;
      var count = edge.querySelector("text.count");
      var x = count.getAttribute("x");
      var y = Number(count.getAttribute("y"));
      Object.keys(data.verdicts[key]).forEach(function (label, i) {
        var text = document.createElementNS("http://www.w3.org/2000/svg", "text");
        text.setAttribute("class", "verdict");
        text.setAttribute("x", x);
        text.setAttribute("text-anchor", count.getAttribute("text-anchor") || "start");
        text.setAttribute("y", String(y + 12 * (i + 1)));
        text.textContent = label + " \u00d7" + data.verdicts[key][label];
        edge.appendChild(text);
      });
    });
    Object.keys(visited).forEach(function (id) {
      var state = byAttr("#machine g.state", "data-state", id);
      if (state) state.classList.add("visited");
    });
    each(data.runs, function (run) {
      if (!run.end_state || run.end_state === data.end_state) return;
      var state = byAttr("#machine g.state", "data-state", run.end_state);
      if (state) state.classList.add("ended-before");
    });
    var end = data.end_state && byAttr("#machine g.state", "data-state", data.end_state);
    if (end) end.classList.add("ended");
  }

  // --- the summary ---
  function summary() {
    var box = document.getElementById("summary");
    var runs = data.runs;
    var last = runs.length ? runs[runs.length - 1] : null;
    var usage = { input_tokens: 0, output_tokens: 0 };
    var replies = 0;
    var calls = 0;
    each(runs, function (run) {
      // the reader's counts: turns that got a reply, tool calls that ran
      replies += run.counts.turns;
      calls += run.counts.tool_calls;
      if (!run.usage) return;
      usage.input_tokens += run.usage.input_tokens || 0;
      usage.output_tokens += run.usage.output_tokens || 0;
    });
    var rows = [["session", data.session]];
    // a resumed session: the files it continued, oldest first (the session is the last)
    if (data.files.length > 1) rows.push(["resumed from", data.files.slice(0, -1).join(" \u2192 ")]);
    rows = rows.concat([
      ["runs", runs.length],
      ["turns", replies],
      ["tool calls", calls],
      ["tokens", num(usage.input_tokens) + " in, " + num(usage.output_tokens) + " out"],
      ["ended", last ? (last.stopped_reason || "unfinished (no run_end)") : "no run recorded"],
    ]);
    if (last && last.error) rows.push(["error", last.error]);
    each(rows, function (row) {
      box.appendChild(el("dt", null, row[0]));
      box.appendChild(el("dd", row[0] === "ended" ? "end" : null, row[1]));
    });
    document.title = "agentfsm run " + data.session;
  }

  // --- the timeline ---
  function runRow(run) {
    var row = el("li", "run");
    var text = "run " + run.index + " \u00b7 " + run.session;
    if (run.resumed_from) text += " \u00b7 resumed from " + run.resumed_from;
    text += " \u00b7 " + (run.stopped_reason || "unfinished");
    row.appendChild(el("span", "run-title", text));
    row.addEventListener("click", function () {
      show(null, run);
    });
    return row;
  }

  function turnRow(turn, index) {
    var row = el("li", "turn");
    row.setAttribute("data-turn", String(index));
    if (selected === index) row.classList.add("selected");
    row.appendChild(el("span", "turn-no", "turn " + turn.turn));
    var u = turn.usage;
    row.appendChild(el("span", "tokens", u ? num(u.input_tokens) + " in / " + num(u.output_tokens) + " out" : ""));
    row.appendChild(el("span", "ms", seconds(turn.ms)));
    var calls = el("span", "calls");
    each(turn.tool_calls, function (call) {
      var chip = el("span", "call " + (call.status || "unanswered"), call.name);
      chip.title = call.name + ": " + (call.status || "no result recorded");
      calls.appendChild(chip);
    });
    row.appendChild(calls);
    var events = el("span", "events");
    each(turn.events, function (event) {
      events.appendChild(el("span", "event " + event.kind, event.kind));
    });
    if (turn.reply === null) events.appendChild(el("span", "event stop", "no reply"));
    row.appendChild(events);
    row.addEventListener("click", function () {
      show(index, null);
    });
    return row;
  }

  function renderPage() {
    var list = document.getElementById("turns");
    while (list.firstChild) list.removeChild(list.firstChild);
    var start = page * PAGE;
    var end = Math.min(turns.length, start + PAGE);
    var lastRun = null;
    for (var i = start; i < end; i++) {
      var turn = turns[i];
      if (turn.run !== lastRun) {
        lastRun = turn.run;
        list.appendChild(runRow(data.runs[turn.run - 1]));
      }
      list.appendChild(turnRow(turn, i));
    }
    if (!turns.length) each(data.runs, function (run) {
      list.appendChild(runRow(run));
    });
    var pages = Math.max(1, Math.ceil(turns.length / PAGE));
    document.getElementById("page").textContent =
      turns.length ? "turns " + (start + 1) + "\u2013" + end + " of " + turns.length + " (page " +
      (page + 1) + " of " + pages + ")" : "no turns";
    document.getElementById("prev").disabled = page === 0;
    document.getElementById("next").disabled = page >= pages - 1;
  }

  function goTo(newPage) {
    var pages = Math.max(1, Math.ceil(turns.length / PAGE));
    page = Math.max(0, Math.min(pages - 1, newPage));
    renderPage();
  }

  // --- one turn's (or run's) messages ---
  function messageBox(index, title) {
    var message = messages[index];
    var box = el("section", "message " + message.role);
    var head = title || message.role;
    if (message.status) head += " \u00b7 " + message.status;
    if (message.images) head += " \u00b7 " + message.images + " image(s) not shown";
    box.appendChild(el("h4", null, head));
    if (message.reasoning) {
      var details = el("details", "reasoning");
      details.appendChild(el("summary", null, "reasoning"));
      details.appendChild(el("pre", null, message.reasoning));
      box.appendChild(details);
    }
    box.appendChild(el("pre", "text", message.text));
    each(message.calls || [], function (call) {
      box.appendChild(el("pre", "args", call.name + " " + call.args));
    });
    return box;
  }

  function show(index, run) {
    selected = index;
    var pane = document.getElementById("detail");
    while (pane.firstChild) pane.removeChild(pane.firstChild);
    each(document.querySelectorAll("#turns li.turn"), function (row) {
      row.classList.toggle("selected", row.getAttribute("data-turn") === String(index));
    });
    if (run) {
      pane.appendChild(el("h3", null, "run " + run.index + " \u00b7 " + run.session));
      if (run.resumed_from) {
        pane.appendChild(el("p", null, "resumed from " + run.resumed_from + " (" + run.seeded +
          " earlier message(s))"));
      }
      if (run.error) pane.appendChild(el("p", "error", run.error));
      each(run.context, function (m) { pane.appendChild(messageBox(m)); });
      each(run.input, function (m) { pane.appendChild(messageBox(m, "input")); });
      return;
    }
    var turn = turns[index];
    pane.appendChild(el("h3", null, "run " + turn.run + " \u00b7 turn " + turn.turn));
    var states = turn.path.length ? [turn.path[0].split(">")[0]] : [];
    each(turn.path, function (edge) { states.push(edge.split(">")[1]); });
    pane.appendChild(el("p", "path", states.join(" \u2192 ")));
    var list = el("ul", "turn-events");
    each(turn.events, function (event) {
      list.appendChild(el("li", "event " + event.kind, event.text));
    });
    pane.appendChild(list);
    if (turn.reply !== null) pane.appendChild(messageBox(turn.reply, "assistant"));
    each(turn.tool_calls, function (call) {
      if (call.result !== null) pane.appendChild(messageBox(call.result, "tool " + call.name));
      else pane.appendChild(el("p", "call unanswered", call.name + ": no result recorded"));
    });
    each(turn.after || [], function (m) { pane.appendChild(messageBox(m)); });
  }

  markDiagram();
  summary();
  document.getElementById("prev").addEventListener("click", function () { goTo(page - 1); });
  document.getElementById("next").addEventListener("click", function () { goTo(page + 1); });
  if (turns.length) {
    selected = turns.length - 1;
    page = Math.floor(selected / PAGE);
    renderPage();
    show(selected, null);
  } else {
    renderPage();
    if (data.runs.length) show(null, data.runs[data.runs.length - 1]);
  }
  window.agentfsmRun = { show: show, goTo: goTo, turns: turns.length };
  document.body.setAttribute("data-ready", "1");
})();
