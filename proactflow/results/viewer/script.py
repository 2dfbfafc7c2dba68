"""The viewer page's script: the suite, its filters, the list, one sample's detail, and the
address.

The address (`index.html#s=<suite>&t=<sample>&m=<model>&j=<judge>&<filter>=...`; ProactBench's
samples are `<dialogue>:<turn>`, its filters `phase`, `verdict` and `category`; `s=` is left out
for the first suite) carries the open sample and every filter, so a link opens the same view.
Each suite's filters are its spec's (suites/declarations.py ViewSpec); a suite's detail is
ProactBench's trigger or the blocks of suites/views.py. Opening a trigger adds a history entry
(back and forward move between opened triggers); a filter change replaces the current one, so
ticking ten boxes does not take ten presses of back.
"""

from .detail_script import DETAIL_SCRIPT

SCRIPT = DETAIL_SCRIPT + r"""
const INDEX = /*INDEX*/null;
const PAGE_SIZE = 100;
const TONES = {good: "PASS", mid: "PARTIAL", bad: "FAIL", none: "not"};
const state = {suite: 0, models: new Set(), judges: new Set(), fields: {}, page: 0, open: null};
const loaded = {};
const samplePlaces = new Map(INDEX.samples.map((s, place) => [`${s[0]}|${s[1]}`, place]));
let missingSample = null;

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
function suiteSpec() { return INDEX.suites[state.suite]; }
function badge(outcome) {
  const tone = (suiteSpec().outcomes || {})[outcome] || "none";
  return el("span", {class: "badge " + TONES[tone]}, outcome);
}
function distinct(values) { return [...new Set(values)].sort(); }
// Filters of the suite: [field, cell position or null for the outcome, split on ", "?].
function filterFields(spec) {
  const fields = [];
  spec.columns.forEach((c, i) => { if (c[2]) fields.push([c[0], i, c[0] === "split"]); });
  fields.push([spec.outcome, null, false]);
  spec.extra.forEach((name, i) => fields.push([name, spec.columns.length + i, false]));
  return fields;
}

// The address: readable where a fragment allows it (`/`, `:`, `@` are legal there).
function encodePart(value) {
  return encodeURIComponent(value).replace(/%2F/g, "/").replace(/%3A/g, ":")
                                  .replace(/%40/g, "@");
}
function addressOf(view) {
  const parts = [];
  if (view.suite && view.suite !== INDEX.suites[0].name) parts.push("s=" + encodePart(view.suite));
  if (view.open !== null) parts.push("t=" + encodePart(view.open));
  for (const model of [...view.models].sort()) parts.push("m=" + encodePart(model));
  for (const judge of [...view.judges].sort()) parts.push("j=" + encodePart(judge));
  for (const [field, value] of Object.entries(view.fields))
    if (value) parts.push(field + "=" + encodePart(value));
  return "#" + parts.join("&");
}
function currentView() {
  const fields = {};
  for (const [field] of filterFields(suiteSpec())) fields[field] = state.fields[field] || "";
  return {suite: suiteSpec().name,
          open: state.open === null ? missingSample : INDEX.samples[state.open][1],
          models: state.models, judges: state.judges, fields: fields};
}
function viewOfAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const name = params.get("s") || INDEX.suites[0].name;
  const spec = INDEX.suites.find(s => s.name === name) || INDEX.suites[0];
  const fields = {};
  for (const [field] of filterFields(spec)) fields[field] = params.get(field) || "";
  return {suite: spec.name, open: params.get("t"), models: new Set(params.getAll("m")),
          judges: new Set(params.getAll("j")), fields: fields};
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
function chooser(legend, values, field) {
  const select = el("select", {id: "f-" + field}, el("option", {value: ""}, "all"),
                    ...values.map(v => el("option", {value: v}, v)));
  select.onchange = () => { state.fields[field] = select.value; state.page = 0; render();
                            writeAddress(false); };
  return el("fieldset", {}, el("legend", {}, legend), select);
}
function suiteEvaluations() {
  return INDEX.evaluations.filter(e => e.suite === state.suite);
}
function fieldValues(field, cell, split) {
  if (cell === null) {
    const seen = distinct(INDEX.rows.filter(r => INDEX.samples[r[0]][0] === state.suite)
                                     .map(r => INDEX.outcomes[r[3]]));
    return [...Object.keys(suiteSpec().outcomes || {}).filter(o => seen.includes(o)),
            ...seen.filter(o => !(o in (suiteSpec().outcomes || {})))];
  }
  const values = INDEX.samples.filter(s => s[0] === state.suite).map(s => String(s[2 + cell]));
  return distinct(split ? values.flatMap(v => v.split(", ")) : values);
}

function buildFilters() {
  const filters = document.getElementById("filters");
  filters.replaceChildren();
  if (INDEX.suites.length > 1) {
    const select = el("select", {id: "f-suite"},
                      ...INDEX.suites.map((s, i) => el("option", {value: i}, s.title)));
    select.value = String(state.suite);
    select.onchange = () => { switchSuite(Number(select.value)); writeAddress(true); };
    filters.appendChild(el("fieldset", {}, el("legend", {}, "suite"), select));
  }
  const evaluations = suiteEvaluations();
  filters.append(
    checkboxes("models", distinct(evaluations.map(e => e.model)), INDEX.short_models,
               state.models, "f-models"),
    checkboxes("judges", distinct(evaluations.map(e => e.judge)), INDEX.short_judges,
               state.judges, "f-judges"));
  for (const [field, cell, split] of filterFields(suiteSpec()))
    filters.appendChild(chooser(field, fieldValues(field, cell, split), field));
  const samples = INDEX.samples.filter(s => s[0] === state.suite).length;
  const rows = INDEX.rows.filter(r => INDEX.samples[r[0]][0] === state.suite).length;
  document.getElementById("summary").textContent =
    `${suiteSpec().title}: ${evaluations.length} evaluations, ${samples} ` +
    `${suiteSpec().samples_noun || "samples"}, ` +
    `${rows} ${suiteSpec().noun}` +
    (INDEX.suites.length > 1 ? ` (${INDEX.suites.length} suites)` : "");
}
function switchSuite(number) {
  state.suite = number;
  state.models.clear(); state.judges.clear(); state.fields = {};
  state.open = null; missingSample = null; state.page = 0;
  buildFilters();
  render();
}
function showFilters() {
  for (const [id, chosen] of [["f-models", state.models], ["f-judges", state.judges]])
    document.querySelectorAll(`#${id} input`).forEach(i => { i.checked = chosen.has(i.value); });
  for (const [field] of filterFields(suiteSpec()))
    document.getElementById("f-" + field).value = state.fields[field] || "";
  const suite = document.getElementById("f-suite");
  if (suite) suite.value = String(state.suite);
}

function evaluationShown(number) {
  const e = INDEX.evaluations[number];
  return e.suite === state.suite && (!state.models.size || state.models.has(e.model)) &&
         (!state.judges.size || state.judges.has(e.judge));
}
function rowShown(row) {
  const sample = INDEX.samples[row[0]];
  if (sample[0] !== state.suite || !evaluationShown(row[1])) return false;
  for (const [field, cell, split] of filterFields(suiteSpec())) {
    const wanted = state.fields[field];
    if (!wanted) continue;
    const value = cell === null ? INDEX.outcomes[row[3]] : String(sample[2 + cell]);
    if (split ? !value.split(", ").includes(wanted) : value !== wanted) return false;
  }
  return true;
}

function renderList() {
  const spec = suiteSpec();
  const rows = INDEX.rows.filter(rowShown);
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
  const shown = rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
  const body = el("tbody", {});
  for (const row of shown) {
    const sample = INDEX.samples[row[0]];
    const evaluation = INDEX.evaluations[row[1]];
    const cells = spec.columns.map((c, i) => el("td", {title: String(sample[2 + i])},
                                                 String(sample[2 + i])));
    const tr = el("tr", {"data-trigger": row[0], class: row[0] === state.open ? "open" : ""},
      ...cells,
      el("td", {title: evaluation.label + (row[2] ? ` (sample ${row[2]})` : "")},
         evaluation.short + (row[2] ? ` #${row[2]}` : "")),
      el("td", {}, badge(INDEX.outcomes[row[3]])));
    tr.onclick = () => openSample(row[0]);
    body.appendChild(tr);
  }
  const previous = el("button", {id: "previous"}, "previous");
  previous.onclick = () => { state.page -= 1; renderList(); };
  previous.disabled = state.page === 0;
  const next = el("button", {id: "next"}, "next");
  next.onclick = () => { state.page += 1; renderList(); };
  next.disabled = state.page >= pages - 1;
  const widths = [...spec.columns.map(c => c[1]), "auto", spec.outcome_width];
  const list = document.getElementById("list");
  list.replaceChildren(
    el("div", {id: "pager"}, previous, next,
       el("span", {id: "count"},
          `${rows.length} ${spec.noun}, page ${state.page + 1} of ${pages}`)),
    el("table", {}, el("colgroup", {}, ...widths.map(w => el("col", {style: `width:${w}`}))),
       el("thead", {}, el("tr", {}, ...[...spec.columns.map(c => c[0]), "evaluation",
                                           spec.outcome].map(h => el("th", {}, h)))), body));
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

function renderDetail() {
  const detail = document.getElementById("detail");
  if (state.open === null) {
    detail.replaceChildren(el("p", {class: "empty"}, missingSample === null
      ? "Open a sample from the list. Tick two models (or two judges) to put them side by side."
      : `The link names sample ${missingSample}, which is not in this viewer.`));
    return;
  }
  const data = loaded[state.open];
  if (!data) { detail.replaceChildren(el("p", {class: "empty"}, "loading...")); return; }
  detail.replaceChildren(...(data.kind === "blocks" ? renderBlocks(data) : renderTrigger(data)));
}

function loadSample(place) {
  if (loaded[place]) return;
  const script = document.createElement("script");
  script.src = `data/t${place}.js`;
  script.onerror = () => { if (state.open === place) document.getElementById("detail")
    .replaceChildren(el("p", {class: "empty"},
                        `data/t${place}.js is missing: write the viewer again`)); };
  document.body.appendChild(script);
}
function openSample(place) {
  state.open = place;
  missingSample = null;
  renderList();
  renderDetail();
  loadSample(place);
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
  const suite = INDEX.suites.findIndex(s => s.name === view.suite);
  if (suite !== state.suite) switchSuite(suite);
  // The filters' boxes hold these very sets: fill them, never replace them.
  for (const [chosen, wanted, field] of [[state.models, view.models, "model"],
                                         [state.judges, view.judges, "judge"]]) {
    const known = new Set(suiteEvaluations().map(e => e[field]));
    chosen.clear();
    for (const value of wanted) if (known.has(value)) chosen.add(value);
  }
  for (const [field] of filterFields(suiteSpec())) {
    const known = [...document.getElementById("f-" + field).options].map(o => o.value);
    state.fields[field] = known.includes(view.fields[field]) ? view.fields[field] : "";
  }
  const place = view.open === null ? undefined : samplePlaces.get(`${state.suite}|${view.open}`);
  state.open = place === undefined ? null : place;
  missingSample = view.open !== null && place === undefined ? view.open : null;
  state.page = 0;
  showFilters();
  render();
  if (state.open !== null) { showOpenRow(); loadSample(state.open); }
}

if (INDEX.suites.length) { buildFilters(); render(); applyAddress(); }
// When the list was first on screen, in ms after navigation started (benchmarks/viewer_size.py).
window.proactflowShown = performance.now();
window.addEventListener("hashchange", applyAddress);
"""
