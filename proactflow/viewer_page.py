"""The viewer's page: HTML, CSS and script in one string; `viewer.py` puts the index in.

Every piece of data is put on screen with text nodes (`textContent`, `createTextNode`), never
parsed as HTML, so a response holding `<script>` shows as those characters.
"""

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>proactflow viewer</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{padding:10px 16px;background:#243b53;color:#fff}
header h1{font-size:17px;margin:0}
#filters{display:flex;flex-wrap:wrap;gap:14px;padding:10px 16px;background:#fff;
 border-bottom:1px solid #ddd}
#filters fieldset{border:1px solid #ccd;border-radius:6px;padding:4px 8px;max-height:110px;
 overflow:auto}
#filters legend{font-weight:600;font-size:12px}
#filters label{display:block;font-size:13px;white-space:nowrap}
main{display:grid;grid-template-columns:minmax(360px,40%) 1fr;gap:0;height:calc(100vh - 160px)}
#list{overflow:auto;border-right:1px solid #ddd;background:#fff}
#list table{border-collapse:collapse;width:100%;font-size:13px;table-layout:fixed}
#list th,#list td{padding:4px 6px;border-bottom:1px solid #eee;text-align:left;
 overflow:hidden;text-overflow:ellipsis}
#list td:first-child{white-space:nowrap}
#list th:nth-child(1){width:30%}#list th:nth-child(2){width:9%}#list th:nth-child(3){width:17%}
#list th:nth-child(5){width:19%}
#list tbody tr{cursor:pointer}#list tbody tr:hover{background:#eef4fb}
#list tr.open{background:#dbe9f8}
#pager{padding:6px;display:flex;gap:8px;align-items:center;font-size:13px}
#detail{overflow:auto;padding:12px 16px}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600}
.PASS{background:#d3f2dc;color:#155724}.PARTIAL{background:#fff1c2;color:#7a5a00}
.FAIL{background:#f8d3d3;color:#7d1a1a}.not{background:#e4e4e7;color:#3f3f46}
.rubric{display:grid;grid-template-columns:repeat(3,1fr);gap:8px}
.rubric div{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 8px;
 font-size:13px}
.context{max-height:260px;overflow:auto;background:#fff;border:1px solid #ddd;border-radius:6px;
 padding:6px 10px}
.msg{margin:6px 0;white-space:pre-wrap;overflow-wrap:anywhere}
.msg b{color:#555}.msg.trigger{background:#eef4fb;border-left:3px solid #3a78c2;padding-left:6px}
#sides{display:flex;gap:10px;align-items:flex-start;overflow-x:auto;padding-bottom:8px}
.side{flex:1 0 300px;max-width:640px;background:#fff;border:1px solid #ccd;border-radius:6px;
 padding:8px 10px}
.side h3{font-size:14px;margin:0 0 6px}
.response{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:6px;
 border-radius:4px}
mark{background:#ffe066}.note{font-size:12px;color:#8a4b00}
#detail h2{overflow-wrap:anywhere}
.empty{color:#777;padding:20px}
</style></head>
<body>
<header><h1>proactflow viewer</h1><div id="summary"></div></header>
<div id="filters"></div>
<main><section id="list"></section><section id="detail">
<p class="empty">Open a trigger from the list. Tick two models (or two judges) to put them side
by side.</p></section></main>
<script>
const INDEX = /*INDEX*/null;
const PAGE_SIZE = 100;
const VERDICTS = ["PASS", "PARTIAL", "FAIL", "not scored"];
const state = {models: new Set(), judges: new Set(), phase: "", verdict: "", category: "",
               page: 0, open: null};
const loaded = {};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "onclick" || name === "onchange") node[name] = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.appendChild(typeof child === "string" || typeof child === "number"
      ? document.createTextNode(String(child)) : child);
  }
  return node;
}
function badge(verdict) {
  return el("span", {class: "badge " + (verdict === "not scored" ? "not" : verdict)}, verdict);
}
function distinct(values) { return [...new Set(values)].sort(); }

function checkboxes(legend, values, chosen, id) {
  const box = el("fieldset", {id: id}, el("legend", {}, legend));
  for (const value of values) {
    const input = el("input", {type: "checkbox", value: value});
    input.onchange = () => { input.checked ? chosen.add(value) : chosen.delete(value);
                             state.page = 0; render(); };
    box.appendChild(el("label", {}, input, " " + value));
  }
  return box;
}
function chooser(legend, values, field, id) {
  const select = el("select", {id: id}, el("option", {value: ""}, "all"),
                    ...values.map(v => el("option", {value: v}, v)));
  select.onchange = () => { state[field] = select.value; state.page = 0; render(); };
  return el("fieldset", {}, el("legend", {}, legend), select);
}

function buildFilters() {
  const evaluations = INDEX.evaluations;
  const filters = document.getElementById("filters");
  filters.append(
    checkboxes("models", distinct(evaluations.map(e => e.model)), state.models, "f-models"),
    checkboxes("judges", distinct(evaluations.map(e => e.judge)), state.judges, "f-judges"),
    chooser("phase", distinct(INDEX.triggers.map(t => t[2])), "phase", "f-phase"),
    chooser("verdict", VERDICTS, "verdict", "f-verdict"),
    chooser("category", distinct(INDEX.triggers.map(t => t[3])), "category", "f-category"));
  document.getElementById("summary").textContent =
    `${evaluations.length} evaluations, ${INDEX.triggers.length} triggers, ` +
    `${INDEX.rows.length} verdicts`;
}

function evaluationShown(number) {
  const e = INDEX.evaluations[number];
  return (!state.models.size || state.models.has(e.model)) &&
         (!state.judges.size || state.judges.has(e.judge));
}
function rowShown(row) {
  const trigger = INDEX.triggers[row[0]];
  return evaluationShown(row[1]) && (!state.phase || trigger[2] === state.phase) &&
         (!state.verdict || row[3] === state.verdict) &&
         (!state.category || trigger[3] === state.category);
}

function renderList() {
  const rows = INDEX.rows.filter(rowShown);
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
  const shown = rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
  const body = el("tbody", {});
  for (const row of shown) {
    const trigger = INDEX.triggers[row[0]];
    const tr = el("tr", {"data-trigger": row[0],
                         class: row[0] === state.open ? "open" : ""},
      el("td", {title: trigger[0]}, trigger[0]), el("td", {}, trigger[1]),
      el("td", {}, trigger[2]),
      el("td", {}, INDEX.evaluations[row[1]].label + (row[2] ? ` #${row[2]}` : "")),
      el("td", {}, badge(row[3])));
    tr.onclick = () => openTrigger(row[0]);
    body.appendChild(tr);
  }
  const previous = el("button", {id: "previous"}, "previous");
  previous.onclick = () => { state.page -= 1; renderList(); };
  previous.disabled = state.page === 0;
  const next = el("button", {id: "next"}, "next");
  next.onclick = () => { state.page += 1; renderList(); };
  next.disabled = state.page >= pages - 1;
  const list = document.getElementById("list");
  list.replaceChildren(
    el("div", {id: "pager"}, previous, next,
       el("span", {id: "count"}, `${rows.length} verdicts, page ${state.page + 1} of ${pages}`)),
    el("table", {}, el("thead", {}, el("tr", {}, ...["dialogue", "turn", "phase",
                                                     "evaluation", "verdict"]
                                                    .map(h => el("th", {}, h)))), body));
}

function highlighted(text, evidence) {
  const box = el("div", {class: "response"});
  if (text === null || text === undefined) { box.appendChild(el("i", {}, "(no response)"));
                                             return box; }
  const at = evidence ? text.indexOf(evidence) : -1;
  if (at < 0) { box.textContent = text; return box; }
  box.append(document.createTextNode(text.slice(0, at)), el("mark", {}, evidence),
             document.createTextNode(text.slice(at + evidence.length)));
  return box;
}

function renderDetail() {
  const detail = document.getElementById("detail");
  const data = loaded[state.open];
  if (state.open === null) return;
  if (!data) { detail.replaceChildren(el("p", {class: "empty"}, "loading...")); return; }
  const context = el("div", {class: "context"});
  data.context.forEach((message, i) => {
    const last = i === data.context.length - 1 && message.role === "user";
    context.appendChild(el("div", {class: "msg" + (last ? " trigger" : "")},
                           el("b", {}, message.role + ": "), message.content));
  });
  const sides = el("div", {id: "sides"});
  for (const result of data.results) {
    if (!evaluationShown(result.evaluation)) continue;
    const e = INDEX.evaluations[result.evaluation];
    const evidenceFound = result.evidence && result.response &&
                          result.response.indexOf(result.evidence) >= 0;
    sides.appendChild(el("div", {class: "side", "data-evaluation": result.evaluation},
      el("h3", {}, e.label + (result.sample ? ` (sample ${result.sample})` : "")),
      el("p", {}, badge(result.verdict), " ", result.status === "scored" ? "" : result.status),
      highlighted(result.response, result.evidence),
      result.evidence && !evidenceFound
        ? el("p", {class: "note"}, "Evidence not found verbatim in the response: \u201c" +
                                   result.evidence + "\u201d") : null,
      result.rationale ? el("p", {}, el("b", {}, "Rationale: "), result.rationale) : null,
      result.message ? el("p", {class: "note"}, result.message) : null));
  }
  if (!sides.childNodes.length)
    sides.appendChild(el("p", {class: "empty"},
                         "No evaluation of this trigger matches the filters."));
  detail.replaceChildren(
    el("h2", {}, `${data.dialogue}, turn ${data.turn}`),
    el("p", {}, `${data.phase} \u00b7 ${data.category}`),
    el("div", {class: "rubric"},
       el("div", {}, el("b", {}, "PASS: "), data.rubric.pass || ""),
       el("div", {}, el("b", {}, "PARTIAL: "), data.rubric.partial || ""),
       el("div", {}, el("b", {}, "FAIL: "), data.rubric.fail || "")),
    el("h3", {}, "Context"), context, el("h3", {}, "Responses and verdicts"), sides);
}

function openTrigger(place) {
  state.open = place;
  renderList();
  if (loaded[place]) { renderDetail(); return; }
  renderDetail();
  const script = document.createElement("script");
  script.src = `data/t${place}.js`;
  script.onerror = () => document.getElementById("detail").replaceChildren(
    el("p", {class: "empty"}, `data/t${place}.js is missing: write the viewer again`));
  document.body.appendChild(script);
}
function proactflowTrigger(place, data) {
  loaded[place] = data;
  if (state.open === place) renderDetail();
}
function render() { renderList(); renderDetail(); }

buildFilters();
render();
</script></body></html>
"""
