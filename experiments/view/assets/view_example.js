/* ctxcomp view: one example, every arm side by side (appended to view.js; same rules: textContent only). */
CTX.example = function (params) {
  const { meta, block, el, fmt, go, table, section, cellName, taskIndex } = CTX;
  const ti = taskIndex(params.get("task") || "");
  const info = meta.tasks[ti];
  const data = info && block(info.block);
  const j = Number(params.get("ex"));
  const ex = data && data.examples[j];
  if (!ex) return [el("p", { class: "error", text: "No such example." })];
  const detail = block(ex.block) || { context: null, arms: [], note: "", rankings: [] };
  const context = detail.context;
  const arms = detail.arms;
  /* an arm that kept part of the context (not all of it), or that set summaries beside their chunks */
  const picks = (a) => ((a.kept && a.kept.length && !a.kept_all) || (a.summaries && a.summaries.some((s) => s[1] !== null)));
  const withSpans = arms.map((a, i) => [a, i]).filter(([a]) => picks(a));
  let hl = params.get("hl");
  let chosen = arms.findIndex((a) => String(a.c) === hl && !a.run && picks(a));
  if (chosen < 0 && params.get("arm") !== null) chosen = Number(params.get("arm"));
  if (chosen < 0 && withSpans.length) chosen = withSpans[0][1];
  const armName = (a) => (a.c !== null && a.c !== undefined ? cellName(meta.cells[a.c]) : (a.run ? a.run + " · " : "") + a.kind);

  /* question, answers, navigation */
  const nav = el("p", { class: "pager" },
    j > 0 ? el("a", { href: "#", onclick: (e) => { e.preventDefault(); go("example", { task: info.name, ex: j - 1, hl }); } }, "‹ previous example ") : null,
    el("a", { href: "#", onclick: (e) => { e.preventDefault(); history.back(); } }, " back "),
    j + 1 < data.examples.length ? el("a", { href: "#", class: "next", onclick: (e) => { e.preventDefault(); go("example", { task: info.name, ex: j + 1, hl }); } }, " next example ›") : null);
  const head = section("Example " + ex.id + " (" + info.name + ")", nav,
    el("div", { class: "question" }, el("strong", { text: "Question: " }), el("span", { id: "question", text: ex.q })),
    el("div", { class: "answers" }, el("strong", { text: "Gold answers: " }),
      ex.answers.map((a) => el("span", { class: "answer", text: a }))),
    detail.source ? el("p", { class: "hint", text: "source: " + detail.source }) : null);

  /* the context, with the chosen arm's kept spans and the gold answers marked */
  const pick = (i) => go("example", { task: info.name, ex: j, arm: i });
  const picker = el("div", { class: "picker" }, el("strong", { text: "Highlight kept text of: " }),
    !withSpans.length ? el("span", { text: "no arm kept part of the context" }) :
    withSpans.length > 4 ? el("select", { name: "hl", onchange: (e) => pick(e.target.value) }, withSpans.map(([a, i]) =>
      el("option", { value: i, selected: i === chosen }, armName(a)))) :
    withSpans.map(([a, i]) => el("label", {}, el("input", { type: "radio", name: "hl", value: i,
      checked: i === chosen, onchange: () => pick(i) }), " " + armName(a) + " ")));
  const legend = el("p", { class: "hint" }, el("mark", { class: "kept", text: "kept" }), " by the arm picked above (the rest greyed), ",
    el("mark", { class: "gold", text: "gold answer" }), " wherever an answer string occurs");
  const ctxCol = el("div", { class: "context-col" }, el("h3", { text: "Original context" }), picker, legend);
  if (context === null || context === undefined) {
    ctxCol.appendChild(el("p", { class: "hint", text: "No context: " + (detail.note || "not available") }));
  } else {
    const arm = chosen >= 0 ? arms[chosen] : null;
    if (arm && arm.summaries && arm.summaries.some((s) => s[1] !== null)) ctxCol.appendChild(summaryGrid(context, arm, ex.answers));
    else {
      const box = Object.assign(markedText(context, arm ? arm.kept : [], ex.answers), { id: "context" });
      ctxCol.appendChild(box);
      requestAnimationFrame(() => {  // bring the first kept span (or gold mark) into the box's view
        const first = box.querySelector("mark.kept") || box.querySelector("mark.gold");
        if (first) box.scrollTop = Math.max(0, first.offsetTop - 40);
      });
    }
  }

  /* one card per arm (run B's arms after run A's) */
  const cards = el("div", { class: "arms" }, arms.map((a, i) => armCard(a, i)));
  return [head, el("div", { class: "example-grid" }, ctxCol, el("div", { class: "arms-col" }, el("h3", { text: "Arms" }), cards))];

  function goldSpans(text, answers) {
    const low = text.toLowerCase(), out = [];
    for (const a of answers) {
      const needle = String(a).toLowerCase();
      if (needle.length < 2 || needle.length > 500) continue;
      for (let at = low.indexOf(needle); at >= 0 && out.length < 2000; at = low.indexOf(needle, at + needle.length)) out.push([at, at + needle.length]);
    }
    out.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
    const merged = [];
    for (const s of out) if (!merged.length || s[0] >= merged[merged.length - 1][1]) merged.push(s);
    return merged;
  }
  function markedText(text, kept, answers, offset = 0) {
    const gold = goldSpans(text, answers);
    const cuts = new Set([0, text.length]);
    const spans = (kept || []).map(([s, e, u]) => [s - offset, e - offset, u]).filter(([s, e]) => e > 0 && s < text.length);
    spans.forEach(([s, e]) => { cuts.add(Math.max(0, s)); cuts.add(Math.min(text.length, e)); });
    gold.forEach(([s, e]) => { cuts.add(s); cuts.add(e); });
    const points = [...cuts].sort((x, y) => x - y);
    const box = el("div", { class: "ctx" + (spans.length ? " dim" : "") });
    let open = null, openKey = null;
    for (let k = 0; k + 1 < points.length; k++) {
      const s = points[k], e = points[k + 1];
      const ki = spans.findIndex(([ks, ke]) => ks <= s && e <= ke);
      const gi = gold.findIndex(([gs, ge]) => gs <= s && e <= ge);
      const piece = text.slice(s, e);
      const node = gi >= 0 ? el("mark", { class: "gold", "data-occ": gi }, piece) : document.createTextNode(piece);
      if (ki < 0) { open = null; openKey = null; box.appendChild(node); continue; }
      if (openKey !== ki) {
        open = el("mark", { class: "kept", "data-unit": spans[ki][2], "data-span": ki, title: spans[ki][2] || "kept" });
        openKey = ki;
        box.appendChild(open);
      }
      open.appendChild(node);
    }
    return box;
  }
  function summaryGrid(text, arm, answers) {
    const rows = el("div", { class: "summaries", id: "context" });
    const sorted = arm.summaries.filter((s) => s[1] !== null).sort((x, y) => x[1] - y[1]);
    for (const [unit, s, e, summary, tokens] of sorted) {
      rows.appendChild(el("div", { class: "sum-row" },
        markedText(text.slice(s, e), [], answers, s),
        el("div", { class: "summary" }, el("div", { class: "hint", text: `summary of ${unit}` + (tokens ? ` (${tokens} tokens)` : "") }),
          el("div", { class: "summary-text", text: summary }))));
    }
    return rows;
  }
  function prompt(pieces) {
    return pieces.map((p) => (typeof p === "string" ? p : context ? context.slice(p[0], p[1]) : "")).join("");
  }
  function armCard(a, i) {
    const c = a.c !== null && a.c !== undefined ? meta.cells[a.c] : null;
    const kv = (k, v) => el("tr", {}, el("th", { text: k }), el("td", { text: v }));
    const card = el("article", { class: "arm" + (a.run ? " run-b" : "") + (i === chosen ? " chosen" : "") + (a.truncated ? " cut" : ""), "data-arm": i, "data-cell": a.c });
    card.appendChild(el("h4", { text: armName(a) }));
    if (a.failure) {
      card.appendChild(el("p", { class: "error", text: "failed: " + a.failure }));
    } else {
      card.appendChild(el("div", { class: "score" + (a.score >= meta.right ? " right" : " wrong") },
        `${a.metric} = ${fmt(a.score, 3)}`));
      if (a.truncated) card.appendChild(el("p", { class: "cut" }, "✂ cut by the reader's window: it saw " +
        `${a.tokens_seen} of the ${a.tokens_out} context tokens the compressor kept`));
      card.appendChild(el("div", { class: "label", text: "Prediction" }));
      card.appendChild(el("pre", { class: "prediction", text: a.prediction }));
      for (const jd of a.judgements || []) {
        card.appendChild(el("div", { class: "judge" }, `judge ${jd.judge} (${jd.protocol}` + (jd.against ? ` vs ${jd.against}` : "") +
          `): ${jd.status === "ok" ? fmt(jd.value, 2) : jd.status}`, jd.reason ? el("div", { class: "reason", text: jd.reason }) : null));
      }
      card.appendChild(el("table", { class: "kv" }, kv("tokens", `${a.tokens_in} → ${a.tokens_out} (reader ${a.reader_tokens_in} in, ${a.reader_tokens_out} out)`),
        kv("latency", `${fmt(a.latency_s, 3)} s reader, ${fmt(a.compress_s, 3)} s compress`),
        kv("answer in kept context", a.answer_in_context === null ? "—" : String(a.answer_in_context)),
        a.cost_usd ? kv("cost", "$" + fmt(a.cost_usd, 5)) : null,
        a.cached ? kv("cached", "yes") : null));
    }
    if (a.note) card.appendChild(el("p", { class: "hint", text: a.note }));
    if (a.kept_ids && a.kept_ids.length) card.appendChild(el("p", { class: "kept-ids" }, "kept: ", a.kept_ids.join(", ")));
    else if (a.kept && a.kept.length && !a.kept_all) card.appendChild(el("p", { class: "hint", text: `${a.kept.length} kept span(s) of the context` }));
    if (a.ranking !== undefined && detail.rankings[a.ranking]) {
      const ranking = detail.rankings[a.ranking], kept = new Set(a.kept_ids || []);
      const full = (u) => (u.startsWith("#") ? ex.id + u : u);
      card.appendChild(el("details", { open: ranking.length <= 12 }, el("summary", {},
        `ranking (${ranking.length} units; first answer-bearing at rank ${a.first_answer_rank === null ? "—" : a.first_answer_rank})`),
        table(["#", "unit", "score", "kept", "answer"], ranking.map(([u, s, b], r) =>
          el("tr", { class: kept.has(full(u)) ? "kept-row" : "" }, el("td", { text: String(r + 1) }), el("td", { text: full(u) }),
            el("td", { text: s === null ? "—" : fmt(s, 4) }), el("td", { text: kept.has(full(u)) ? "✓" : "" }),
            el("td", { text: b === null ? "?" : b ? "✓" : "" }))), { cls: "grid ranking" })));
    }
    if (a.trace && Object.keys(a.trace).length) card.appendChild(el("details", {}, el("summary", { text: "trace" }),
      el("pre", { text: JSON.stringify(a.trace, null, 1) })));
    if (a.identity) card.appendChild(el("p", { class: "hint", text: "compressor: " + a.identity }));
    if (a.prompt) card.appendChild(el("details", { class: "prompt" }, el("summary", { text: "prompt " + (a.prompt_hash || "") }),
      el("pre", { text: prompt(a.prompt) })));
    if (c && !a.run) card.appendChild(el("a", { href: "#/browse?cell=" + a.c, class: "hint" }, "all examples of this arm"));
    return card;
  }
};
window.addEventListener("hashchange", CTX.render);
CTX.render();
