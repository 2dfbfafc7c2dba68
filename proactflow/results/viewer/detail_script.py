"""The viewer's drawing of one sample: ProactBench's trigger (context, rubric, each response
with the judge's evidence highlighted) and the other suites' blocks (suites/views.py: text,
facts, tables whose cells may be images or badges, images). Everything is put on screen as
text nodes or `<img>` elements pointing into `media/`, never parsed as HTML."""

DETAIL_SCRIPT = r"""
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

// The blocks of suites/views.py.
function image(file, title, kind) {
  return el("img", {src: "media/" + file, title: title || file, alt: title || file,
                    class: kind, "data-file": file});
}
function cellNode(cell) {
  if (cell === null || cell === undefined) return "\u2013";
  if (typeof cell === "object") {
    if (cell.img) return image(cell.img, cell.title, "thumb");
    if (cell.imgs) return el("span", {class: "strip"},
                             ...cell.imgs.map(i => image(i.img, i.title, "thumb")));
    if (cell.badge !== undefined) return badge(cell.badge);
  }
  return String(cell);
}
function block(b) {
  if (b.t === "h") return el("h4", {}, b.text);
  if (b.t === "text")
    return el("div", {class: "msg"}, b.label ? el("b", {}, b.label + ": ") : null,
              b.text === null ? el("i", {}, "(none)") : b.text);
  if (b.t === "facts")
    return el("p", {class: "facts"},
              ...b.items.map(([k, v]) => el("span", {}, el("b", {}, k + ": "), String(v))));
  if (b.t === "image")
    return el("figure", {}, image(b.src, b.caption, "shot"),
              b.caption ? el("figcaption", {}, b.caption) : null);
  if (b.t === "table") {
    const marked = new Set(b.marked || []);
    return el("div", {class: "blocktable"}, el("table", {},
      el("thead", {}, el("tr", {}, ...b.head.map(h => el("th", {}, h)))),
      el("tbody", {}, ...b.rows.map((row, i) => el("tr", {class: marked.has(i) ? "marked" : ""},
                                                   ...row.map(c => el("td", {}, cellNode(c))))))));
  }
  return el("pre", {}, JSON.stringify(b));
}
function renderBlocks(data) {
  const sides = el("div", {id: "sides"});
  for (const result of data.results) {
    if (!evaluationShown(result.evaluation)) continue;
    const e = INDEX.evaluations[result.evaluation];
    sides.appendChild(el("div", {class: "side", "data-evaluation": result.evaluation},
      el("h3", {}, e.label + (result.sample ? ` (sample ${result.sample})` : "")),
      el("p", {}, badge(result.verdict)), ...result.blocks.map(block)));
  }
  if (!sides.childNodes.length)
    sides.appendChild(el("p", {class: "empty"},
                         "No evaluation of this sample matches the filters."));
  const sample = INDEX.samples[state.open];
  return [el("h2", {}, `${suiteSpec().title}: ${data.sample}`),
          el("p", {}, suiteSpec().columns.map((c, i) => `${c[0]} ${sample[2 + i]}`)
                                   .join(" \u00b7 ")),
          ...data.shared.map(block), el("h3", {}, "Evaluations"), sides];
}

function renderTrigger(data) {
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
  return [
    el("h2", {}, `${data.dialogue}, turn ${data.turn}`),
    el("p", {}, `${data.phase} \u00b7 ${data.category}`),
    el("div", {class: "rubric"},
       el("div", {}, el("b", {}, "PASS: "), data.rubric.pass || ""),
       el("div", {}, el("b", {}, "PARTIAL: "), data.rubric.partial || ""),
       el("div", {}, el("b", {}, "FAIL: "), data.rubric.fail || "")),
    el("h3", {}, "Context"), context, el("h3", {}, "Responses and verdicts"), sides];
}

"""
