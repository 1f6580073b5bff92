/* ctxcomp view: overview and example browser. Every string from the run is rendered with textContent, never
   parsed as HTML; data blocks are parsed from their <script type="application/json"> elements when first shown. */
"use strict";
const CTX = (() => {
  const blocks = new Map();
  function block(id) {
    if (!blocks.has(id)) {
      const node = document.getElementById(id);
      blocks.set(id, node ? JSON.parse(node.textContent) : null);
    }
    return blocks.get(id);
  }
  const meta = block("meta");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  const fmt = (v, d = 2) => (v === null || v === undefined ? "—" : typeof v === "number" ? v.toFixed(d) : String(v));
  const cellName = (c) => (c.run ? c.run + " · " : "") + c.arm + " | " + c.reader;
  function route() {
    const h = location.hash.replace(/^#\/?/, "");
    const [path, query] = h.split("?");
    return { path: path || "", params: new URLSearchParams(query || "") };
  }
  function go(path, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
    const s = q.toString();
    location.hash = "#/" + path + (s ? "?" + s : "");
  }
  function table(header, rows, opts) {
    const t = el("table", { class: (opts && opts.cls) || "grid" });
    t.appendChild(el("thead", {}, el("tr", {}, header.map((h) => el("th", { text: h })))));
    const tb = el("tbody");
    rows.forEach((r) => tb.appendChild(r instanceof Node ? r : el("tr", {}, r.map((v) => (v instanceof Node ? v : el("td", { text: v }))))));
    t.appendChild(tb);
    return t;
  }
  function section(title, ...children) {
    return el("section", { class: "panel" }, el("h2", { text: title }), ...children);
  }
  const taskIndex = (name) => meta.tasks.findIndex((t) => t.name === name);

  /* ---------------------------------------------------------------- overview */
  function overview() {
    const out = [];
    out.push(el("p", { class: "lede" }, `Run ${meta.run} (${meta.path}): ${meta.n_predictions} predictions in `,
      `${meta.cells.filter((c) => !c.run).length} cells` + (meta.against ? `; against ${meta.against} (B)` : "") +
      `. Generated ${meta.generated}. Click a score to see its examples.`));
    if (meta.summary && meta.summary.length) out.push(section("Summary", el("ul", { class: "summary" },
      meta.summary.map(([topic, text]) => el("li", {}, el("strong", { text: topic }), ": " + text)))));
    const flipsAndFailures = () => [section("Flips against the full-context arm",
      el("p", { class: "hint", text: `An item score ≥ ${meta.right} counts as right. lost: full right, the arm wrong; gained: the reverse.` }),
      flipTable()), section("Failures by reason", meta.failures.length ? table(["stage", "reason", "count", "for example", "cells"],
      meta.failures.map((f) => [f.stage, f.reason, String(f.count), f.example, el("td", {}, f.cells.map((c) => el("a", {
        href: "#/browse?cell=" + c + "&status=failed", class: "chip" }, cellName(meta.cells[c]))))])) :
      el("p", { text: "No example failed." }))];
    meta.tables.forEach((t, k) => {
      const rows = t.body.map((row, i) => el("tr", {}, row.map((v, j) => {
        const ci = t.cells ? t.cells[i][j] : null;
        if (ci === null || ci === undefined) return el("td", { text: v });
        return el("td", { class: "cell-link", "data-cell": ci, title: "examples of this cell",
          onclick: () => go("browse", { cell: ci }) }, v);
      })));
      out.push(section(t.title, table(t.header, rows, { cls: "grid " + t.name }),
        t.notes.length ? el("ul", { class: "notes" }, t.notes.map((n) => el("li", { text: n }))) : null));
      if (k === 0) out.push(...flipsAndFailures());  // right under the scores
    });
    if (!meta.tables.length) out.push(...flipsAndFailures());
    out.push(section("Plots", meta.plots.length ? el("div", { class: "plots" }, meta.plots.map((p) => el("figure", {},
      el("img", { src: "data:image/svg+xml;base64," + p.svg, alt: p.name }), el("figcaption", { text: p.name })))) :
      el("p", { text: "No plot for this run." })));
    out.push(section("Manifest", ...Object.entries(meta.manifest).map(([name, text]) =>
      el("details", {}, el("summary", { text: name }), el("pre", { class: "manifest", text })))));
    return out;
  }
  function flipTable() {
    const rows = [];
    meta.cells.forEach((c, i) => {
      if (c.run || c.is_full || !meta.cells.some((f) => f.is_full && !f.run && f.task === c.task && f.reader === c.reader)) return;
      const link = (kind) => el("td", {}, el("a", { href: `#/browse?cell=${i}&flip=${kind}`, class: "flip-link",
        "data-cell": i, "data-flip": kind }, String(c[kind])));
      rows.push(el("tr", {}, el("td", { text: c.task }), el("td", { text: c.reader }), el("td", { text: c.arm }),
        el("td", { text: String(c.n_paired) }), link("lost"), link("gained")));
    });
    return rows.length ? table(["task", "reader", "arm", "paired", "lost", "gained"], rows, { cls: "grid flips" }) :
      el("p", { text: "No arm has a full-context arm of the same reader to compare with." });
  }

  /* ----------------------------------------------------------------- browser */
  const PAGE = 50;
  function browse(params) {
    let task = params.get("task") || "";
    const cellParam = params.get("cell");
    const cell = cellParam !== null && cellParam !== "" ? meta.cells[Number(cellParam)] : null;
    if (cell) task = cell.task;
    const ti = Math.max(0, taskIndex(task));
    const info = meta.tasks[ti];
    if (!info) return [el("p", { text: "This run has no examples." })];
    const data = block(info.block);
    const f = { reader: cell ? cell.reader : params.get("reader") || "", arm: cell ? cell.arm : params.get("arm") || "",
      min: params.get("min") || "", max: params.get("max") || "", flip: params.get("flip") || "",
      status: params.get("status") || "", q: params.get("q") || "" };
    const page = Number(params.get("page") || 0);
    const cellsOfTask = meta.cells.map((c, i) => [c, i]).filter(([c]) => !c.run && c.task === info.name);
    const set = (k, v) => go("browse", k === "task" ? { task: v } : { task: info.name, ...f, [k]: v });
    const select = (name, options, value) => el("select", { name, onchange: (e) => set(name, e.target.value) },
      options.map(([v, label]) => el("option", { value: v, selected: v === value }, label)));
    const uniq = (xs) => [...new Set(xs)];
    const controls = el("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); } },
      el("label", {}, "task ", select("task", meta.tasks.map((t) => [t.name, t.name]), info.name)),
      el("label", {}, "reader ", select("reader", [["", "all"], ...uniq(cellsOfTask.map(([c]) => c.reader)).map((r) => [r, r])], f.reader)),
      el("label", {}, "arm ", select("arm", [["", "all"], ...uniq(cellsOfTask.map(([c]) => c.arm)).map((a) => [a, a])], f.arm)),
      el("label", {}, "score ", el("input", { name: "min", type: "number", step: "0.01", min: 0, max: 1, value: f.min,
        placeholder: "min", onchange: (e) => set("min", e.target.value) }), " – ", el("input", { name: "max",
        type: "number", step: "0.01", value: f.max, placeholder: "max", onchange: (e) => set("max", e.target.value) })),
      el("label", {}, "vs full ", select("flip", [["", "any"], ["lost", "lost (full right, arm wrong)"],
        ["gained", "gained (full wrong, arm right)"], ["flip", "any flip"], ["worse", "lower score"], ["better", "higher score"]], f.flip)),
      el("label", {}, "status ", select("status", [["", "all"], ["scored", "scored"], ["failed", "failed"],
        ["cut", "cut by the reader's window"]], f.status)),
      el("label", {}, "search ", el("input", { name: "q", type: "search", value: f.q, placeholder: "question, answer, prediction, id",
        onchange: (e) => set("q", e.target.value) })));
    const needle = f.q.toLowerCase();
    const lo = f.min === "" ? -Infinity : Number(f.min), hi = f.max === "" ? Infinity : Number(f.max);
    const rows = data.rows.filter((r) => {
      const c = meta.cells[r.c];
      if (f.reader && (!c || c.reader !== f.reader)) return false;
      if (f.arm && (!c || c.arm !== f.arm)) return false;
      if (f.status === "failed" && r.s !== null) return false;
      if (f.status === "scored" && r.s === null) return false;
      if (f.status === "cut" && !r.t) return false;
      if ((f.min !== "" || f.max !== "") && (r.s === null || r.s < lo || r.s > hi)) return false;
      if (f.flip === "lost" || f.flip === "gained") { if (r.v !== f.flip) return false; }
      else if (f.flip === "flip") { if (!r.v) return false; }
      else if (f.flip === "worse") { if (!(r.d < 0)) return false; }
      else if (f.flip === "better") { if (!(r.d > 0)) return false; }
      if (needle) {
        if (r.h === undefined) {
          const ex = data.examples[r.e];
          r.h = [ex.id, ex.q, ex.answers.join("\n"), r.p || "", r.f || ""].join("\n").toLowerCase();
        }
        if (!r.h.includes(needle)) return false;
      }
      return true;
    });
    const shown = rows.slice(page * PAGE, (page + 1) * PAGE);
    const body = shown.map((r) => {
      const ex = data.examples[r.e], c = meta.cells[r.c];
      return el("tr", { class: "row" + (r.s === null ? " failed" : "") + (r.t ? " cut" : ""), "data-example": ex.id, "data-cell": r.c,
        onclick: () => go("example", { task: info.name, ex: r.e, hl: r.c }) },
        el("td", { text: ex.id }), el("td", { text: c ? c.arm : "?" }), el("td", { text: c ? c.reader : "?" }),
        el("td", { class: "num", text: r.s === null ? "failed" : fmt(r.s) }),
        el("td", { class: "cut-mark", title: r.t ? "the reader's window cut this prompt" : null, text: r.t ? "✂ cut" : "" }),
        el("td", { class: r.v ? "flip " + r.v : "", text: r.v || (r.d ? (r.d > 0 ? "+" : "") + fmt(r.d) : "") }),
        el("td", { class: "clip", text: ex.q }), el("td", { class: "clip", text: r.s === null ? r.f : r.p }));
    });
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    const pager = el("p", { class: "pager" }, `${rows.length} of ${data.rows.length} rows (${info.n_examples} examples)`,
      page > 0 ? el("a", { href: "#", onclick: (e) => { e.preventDefault(); go("browse", { task: info.name, ...f, page: page - 1 }); } }, " ‹ previous") : null,
      ` page ${page + 1} of ${pages} `,
      page + 1 < pages ? el("a", { href: "#", class: "next", onclick: (e) => { e.preventDefault(); go("browse", { task: info.name, ...f, page: page + 1 }); } }, "next ›") : null);
    return [section("Examples: " + info.name + (cell ? " | " + cellName(cell) : ""), controls,
      info.note ? el("p", { class: "hint", text: "Contexts: " + info.note }) : null, pager,
      table(["example", "arm", "reader", "score", "reader window", "vs full", "question", "prediction / failure"], body, { cls: "grid rows" }))];
  }

  /* ------------------------------------------------------------------ router */
  function render() {
    const { path, params } = route();
    const app = document.getElementById("app");
    let nodes;
    try {
      nodes = path === "browse" ? browse(params) : path === "example" ? CTX.example(params) : overview();
    } catch (err) {
      nodes = [el("p", { class: "error", text: "Could not render this view: " + err })];
    }
    app.replaceChildren(...nodes);
    document.getElementById("runname").textContent = meta.run + (meta.against ? " vs " + meta.against : "");
    window.scrollTo(0, 0);
    document.body.setAttribute("data-view", path || "overview");
  }
  return { meta, block, el, fmt, go, table, section, cellName, taskIndex, render };
})();
