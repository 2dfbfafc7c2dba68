"""The viewer page's script: filters, the list, one trigger's detail, and the address.

The address (`index.html#t=<dialogue>:<turn>&m=<model>&j=<judge>&phase=...`) carries the open
trigger and every filter, so a link opens the same view. Opening a trigger adds a history entry
(back and forward move between opened triggers); a filter change replaces the current one, so
ticking ten boxes does not take ten presses of back.
"""

SCRIPT = r"""
const INDEX = /*INDEX*/null;
const PAGE_SIZE = 100;
const VERDICTS = ["PASS", "PARTIAL", "FAIL", "not scored"];
const state = {models: new Set(), judges: new Set(), phase: "", verdict: "", category: "",
               page: 0, open: null};
const loaded = {};
const triggerPlaces = new Map(INDEX.triggers.map((t, place) => [`${t[0]}:${t[1]}`, place]));
let missingTrigger = null;

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

// The address: readable where a fragment allows it (`/`, `:`, `@` are legal there).
function encodePart(value) {
  return encodeURIComponent(value).replace(/%2F/g, "/").replace(/%3A/g, ":")
                                  .replace(/%40/g, "@");
}
function addressOf(view) {
  const parts = [];
  if (view.open !== null) parts.push("t=" + encodePart(view.open));
  for (const model of [...view.models].sort()) parts.push("m=" + encodePart(model));
  for (const judge of [...view.judges].sort()) parts.push("j=" + encodePart(judge));
  for (const field of ["phase", "verdict", "category"])
    if (view[field]) parts.push(field + "=" + encodePart(view[field]));
  return "#" + parts.join("&");
}
function triggerName(place) {
  const trigger = INDEX.triggers[place];
  return `${trigger[0]}:${trigger[1]}`;
}
function currentView() {
  return {open: state.open === null ? missingTrigger : triggerName(state.open),
          models: state.models, judges: state.judges, phase: state.phase,
          verdict: state.verdict, category: state.category};
}
function viewOfAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  return {open: params.get("t"), models: new Set(params.getAll("m")),
          judges: new Set(params.getAll("j")), phase: params.get("phase") || "",
          verdict: params.get("verdict") || "", category: params.get("category") || ""};
}
function writeAddress(newEntry) {
  const address = addressOf(currentView());
  if (address === addressOf(viewOfAddress())) return;
  if (newEntry) location.hash = address;
  else location.replace(address);
}

function checkboxes(legend, values, shortNames, chosen, id) {
  const box = el("fieldset", {id: id}, el("legend", {}, legend));
  for (const value of values) {
    const input = el("input", {type: "checkbox", value: value});
    input.onchange = () => { input.checked ? chosen.add(value) : chosen.delete(value);
                             state.page = 0; render(); writeAddress(false); };
    box.appendChild(el("label", {title: value}, input, " " + (shortNames[value] || value)));
  }
  return box;
}
function chooser(legend, values, field, id) {
  const select = el("select", {id: id}, el("option", {value: ""}, "all"),
                    ...values.map(v => el("option", {value: v}, v)));
  select.onchange = () => { state[field] = select.value; state.page = 0; render();
                            writeAddress(false); };
  return el("fieldset", {}, el("legend", {}, legend), select);
}

function buildFilters() {
  const evaluations = INDEX.evaluations;
  const filters = document.getElementById("filters");
  filters.append(
    checkboxes("models", distinct(evaluations.map(e => e.model)), INDEX.short_models,
               state.models, "f-models"),
    checkboxes("judges", distinct(evaluations.map(e => e.judge)), INDEX.short_judges,
               state.judges, "f-judges"),
    chooser("phase", distinct(INDEX.triggers.map(t => t[2])), "phase", "f-phase"),
    chooser("verdict", VERDICTS, "verdict", "f-verdict"),
    chooser("category", distinct(INDEX.triggers.map(t => t[3])), "category", "f-category"));
  document.getElementById("summary").textContent =
    `${evaluations.length} evaluations, ${INDEX.triggers.length} triggers, ` +
    `${INDEX.rows.length} verdicts`;
}
function showFilters() {
  for (const [id, chosen] of [["f-models", state.models], ["f-judges", state.judges]])
    document.querySelectorAll(`#${id} input`).forEach(i => { i.checked = chosen.has(i.value); });
  for (const field of ["phase", "verdict", "category"])
    document.getElementById("f-" + field).value = state[field];
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
    const evaluation = INDEX.evaluations[row[1]];
    const tr = el("tr", {"data-trigger": row[0],
                         class: row[0] === state.open ? "open" : ""},
      el("td", {title: trigger[0]}, trigger[0]), el("td", {}, trigger[1]),
      el("td", {title: trigger[2]}, trigger[2]),
      el("td", {title: evaluation.label + (row[2] ? ` (sample ${row[2]})` : "")},
         evaluation.short + (row[2] ? ` #${row[2]}` : "")),
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
function showOpenRow() {
  const rows = INDEX.rows.filter(rowShown);
  const at = rows.findIndex(row => row[0] === state.open);
  if (at < 0) return;
  state.page = Math.floor(at / PAGE_SIZE);
  renderList();
  const row = document.querySelector("#list tr.open");
  if (row) row.scrollIntoView({block: "nearest"});
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
  if (state.open === null) {
    detail.replaceChildren(el("p", {class: "empty"}, missingTrigger === null
      ? "Open a trigger from the list. Tick two models (or two judges) to put them side by side."
      : `The link names trigger ${missingTrigger}, which is not in this viewer.`));
    return;
  }
  const data = loaded[state.open];
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

function loadTrigger(place) {
  if (loaded[place]) return;
  const script = document.createElement("script");
  script.src = `data/t${place}.js`;
  script.onerror = () => { if (state.open === place) document.getElementById("detail")
    .replaceChildren(el("p", {class: "empty"},
                        `data/t${place}.js is missing: write the viewer again`)); };
  document.body.appendChild(script);
}
function openTrigger(place) {
  state.open = place;
  missingTrigger = null;
  renderList();
  renderDetail();
  loadTrigger(place);
  writeAddress(true);
}
function proactflowTrigger(place, data) {
  loaded[place] = data;
  if (state.open === place) renderDetail();
}
function render() { renderList(); renderDetail(); }

// A link, back or forward: the view the address names (values this viewer lacks are ignored).
function applyAddress() {
  const view = viewOfAddress();
  if (addressOf(view) === addressOf(currentView())) return;
  // The filters' boxes hold these very sets: fill them, never replace them.
  for (const [chosen, wanted, field] of [[state.models, view.models, "model"],
                                         [state.judges, view.judges, "judge"]]) {
    const known = new Set(INDEX.evaluations.map(e => e[field]));
    chosen.clear();
    for (const value of wanted) if (known.has(value)) chosen.add(value);
  }
  for (const field of ["phase", "verdict", "category"]) {
    const known = [...document.getElementById("f-" + field).options].map(o => o.value);
    state[field] = known.includes(view[field]) ? view[field] : "";
  }
  const place = view.open === null ? undefined : triggerPlaces.get(view.open);
  state.open = place === undefined ? null : place;
  missingTrigger = view.open !== null && place === undefined ? view.open : null;
  state.page = 0;
  showFilters();
  render();
  if (state.open !== null) { showOpenRow(); loadTrigger(state.open); }
}

buildFilters();
render();
applyAddress();
window.addEventListener("hashchange", applyAddress);
"""
