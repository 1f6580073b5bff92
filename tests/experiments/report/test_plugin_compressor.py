"""A compressor nobody in ctxcomp knows (an import path to a class of this module, not installed, registered
nowhere) gets what a built-in gets: its kept text highlighted in the view, its own colour and legend entry in
every plot, and exact ``--dry-run`` rows, all from its class (the one extension point, docs/plugins.md)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from compressors.base import BudgetSupport, CompressedContext, Compressible, Compressor, Sizing
from readers.base import Tokenizer

PLUGIN = f"{__name__}:LeadWords"
COLOUR = "#123456"
WORDS = 12


class LeadWords(Compressor):
    """Keeps the context's first ``words`` words, fewer where a budget needs it: what it keeps is decided by
    sizes alone, so it can say exactly what a dry run will see without running (though it declares no
    ``calls_model = False``, so the dry run must ask it)."""

    budget_support: ClassVar[BudgetSupport] = "guaranteed"
    color, marker = COLOUR, "s"

    def __init__(self, words: int = WORDS, tokenizer: Tokenizer | None = None) -> None:
        super().__init__(tokenizer)
        self.words = words

    @property
    def label(self) -> str:
        return f"lead-words({self.words})"

    def _end(self, item: Compressible, budget: int | None) -> int:
        ends = [m.end() for m in re.finditer(r"\S+", item.context)][: self.words]
        while ends and budget is not None and self.count_tokens(item.context[: ends[-1]]) > budget:
            ends.pop()
        return ends[-1] if ends else 0

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        end = self._end(item, budget)
        text = item.context[:end]
        return CompressedContext(text=text, tokens_in=self.count_tokens(item.context), tokens_out=self.count_tokens(text),
                                 budget=budget, kept_spans=((0, end),) if end else ())

    def sizing(self, item: Compressible, budget: int | None = None) -> Sizing:
        return Sizing(self.count_tokens(item.context[: self._end(item, budget)]), True, "the lead words, counted")


CONFIG = {
    "name": "plugin",
    "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 6, "num_docs": 4, "words_per_doc": 30}}],
    "compressors": ["full", {"name": PLUGIN, "budget": [6, 10]},
                    {"name": "truncate", "params": {"policy": "right"}, "budget": [6, 10]}],
    "readers": ["extractive"],
}


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory) -> Path:
    from experiments import evaluate

    run = tmp_path_factory.mktemp("plugin") / "run"
    evaluate(CONFIG, run, report=False, progress=False)
    return run


def test_the_view_highlights_what_the_plugin_said_it_kept(plugin_run):
    from experiments.cli.view import load_contexts
    from experiments.view.page import build_view

    meta, blocks = build_view(plugin_run, contexts=load_contexts)
    checked = 0
    for ex in blocks[meta["tasks"][0]["block"]]["examples"]:
        block = blocks[ex["block"]]
        context = block["context"]
        for arm in (a for a in block["arms"] if a["kind"] == PLUGIN):
            words = context.split()[:WORDS]
            (start, end, _), = arm["kept"]
            assert start == 0 and context[start:end].split() == words[: len(context[start:end].split())]
            assert 0 < end < len(context) and not arm["kept_all"]
            checked += 1
    assert checked == 2 * 6  # two budgets, six examples


def test_every_plot_draws_the_plugin_in_its_own_colour_with_its_legend_entry(plugin_run, monkeypatch):
    """Every figure the report draws is caught before it is saved: wherever a compressor is drawn, the plugin is
    there in its class's colour, and named in the legend (the forest, which has no legend, by its row)."""
    from matplotlib.colors import to_hex

    from experiments.report.plots import curves, scores
    from experiments.report.write import write_report

    figures = []

    def keep(fig, path):
        figures.append((Path(path).stem, fig))
        return []

    monkeypatch.setattr(curves, "save", keep)
    monkeypatch.setattr(scores, "save", keep)
    write_report(plugin_run, plots=True)
    names = {name for name, _ in figures}
    assert {"delta_vs_full", "tradeoff_extractive", "position_nq_multidoc"} <= names, names
    for name, fig in figures:
        colours = {to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()}
        assert COLOUR in colours, name
        texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        texts += [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
        assert any("lead-words" in t for t in texts), (name, texts)
        handles = [h for legend in fig.legends for h, t in zip(legend.legend_handles, legend.get_texts())
                   if "lead-words" in t.get_text()]
        assert all(to_hex(h.get_color()) == COLOUR for h in handles), name


def test_the_dry_run_rows_of_a_plugin_that_counts_exactly_are_exact(plugin_run, tmp_path):
    import yaml

    from experiments.cli.app import app

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    res = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if "lead-words" in line]
    assert len(rows) == 2 and all("up to" not in r and "about" not in r for r in rows), res.output
    assert all("the lead words, counted" in r for r in rows), res.output
    # and the counts are the run's: the prompt tokens of each plugin row equal what the run's reader read
    from experiments.run.config import parse_config
    from experiments.run.estimate import estimate
    from experiments.run.grid import expand_grid

    config = parse_config(CONFIG)
    plan = estimate(config, expand_grid(config), set())
    preds = [line for line in (plugin_run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    import json

    read = {}
    for line in map(json.loads, preds):
        read[line["config_hash"]] = read.get(line["config_hash"], 0) + line["reader_tokens_in"]
    plugin_rows = [r for r in plan.rows if "lead-words" in r.compressor]
    assert plugin_rows and all(r.exact for r in plugin_rows)
    assert [r.prompt_tokens for r in plugin_rows] == [read[r.config_hash] for r in plugin_rows]
