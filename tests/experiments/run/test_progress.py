"""The run's progress bar counts what is saved, never ahead of it, and names the cell being worked on; work that is
long inside one example (summaries per chunk) says how far it is beside the bar; --litm and --source take data
names as well as paths."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.progress import progress_note, reporting_progress
from experiments.cli.app import app
from experiments.run import driver
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from readers.base import Generation, Reader
from readers.registry import make_reader

CONFIG = {
    "name": "bar",
    "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 4, "num_docs": 3, "words_per_doc": 20}}],
    "compressors": ["full", {"name": "retrieval", "label": "top1", "params": {"retriever": "bm25", "top_n": 1,
                                                                             "chunk_size": 20}}],
    "readers": ["extractive"],
    "batch_size": 2,
}


class Bar:
    """Stands in for the tqdm bar to read what it shows; the run, its reader and its files are real."""

    def __init__(self) -> None:
        self.n, self.desc, self.postfix = 0, "", ""

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, k: int = 1) -> None:
        self.n += k

    def set_description(self, desc: str, refresh: bool = True) -> None:
        self.desc = desc

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = text


def saved(run_dir: Path) -> int:
    return sum(len((run_dir / name).read_text().splitlines()) for name in ("predictions.jsonl", "failures.jsonl")
               if (run_dir / name).exists())


def test_the_bar_counts_saved_predictions_and_names_the_cell_being_read(tmp_path, monkeypatch):
    bar, seen = Bar(), []
    monkeypatch.setattr(driver, "progress_bar", lambda *a, **kw: bar)
    out = tmp_path / "run"

    def reader(name, **params):
        real = make_reader(name, **params)
        inner = real.generate

        def generate(requests):  # the reader has said each request is answered; nothing of the batch is saved yet
            answers = inner(requests)
            seen.append((bar.n, saved(out), bar.desc, bar.postfix))
            return answers

        real.generate = generate
        return real

    Runner(parse_config(CONFIG), out, reader_factory=reader).run()
    assert len(seen) == 4 and bar.n == saved(out) == 8
    for count, on_disk, _, postfix in seen:
        assert count == on_disk  # answered but not yet written: not counted
        assert postfix == "2 answered, saving with their batch"
    assert [desc for *_, desc, _ in seen] == ["nq_multidoc | full | extractive"] * 2 + ["nq_multidoc | top1 | extractive"] * 2


class FirstWords(Reader):
    """A summarizer that keeps the first words of each chunk, and says as each request is answered."""

    identity = "first-words"

    def generate(self, requests):
        out = []
        for r in requests:
            text = r.prompt.split("Text:\n", 1)[1].split("\n\nSummary:", 1)[0]
            out.append(Generation(" ".join(text.split()[:8]), tokens_in=10, tokens_out=8))
            self._advance(1)
        return out


def test_summaries_say_how_far_each_example_is(tmp_path):
    from compressors.registry import make_compressor
    from experiments.data.synthetic import make_multidoc_qa

    (example,) = make_multidoc_qa(1, num_docs=3, words_per_doc=40, seed=0)
    summarize = make_compressor({"name": "summarize", "params": {"chunk_size": 40}}, reader=FirstWords())
    notes: list[str] = []
    with reporting_progress(notes.append):
        summarize.compress(example)
    chunks = summarize.compress(example).trace["n_chunks"]
    assert chunks >= 2
    assert notes == [f"summarizing example {example.id}: {i}/{chunks} chunks" for i in range(1, chunks + 1)]
    progress_note()("outside a run this goes nowhere")  # no error, no output


def test_llmlingua_says_which_example_it_compresses(tmp_path):
    pytest.importorskip("llmlingua")
    from compressors.registry import make_compressor
    from experiments.data.synthetic import make_multidoc_qa
    from tests.support.tiny_lm import build_tiny_lm

    examples = make_multidoc_qa(1, num_docs=3, words_per_doc=20, seed=0)
    model = build_tiny_lm(tmp_path / "lm", [p.text for ex in examples for p in ex.passages])
    lingua = make_compressor({"name": "longllmlingua", "params": {"model": model, "device": "cpu", "rate": 0.5}})
    notes: list[str] = []
    with reporting_progress(notes.append):
        for ex in examples:
            lingua.compress(ex)
    assert notes == [f"longllmlingua: compressing example {ex.id} (3 documents)" for ex in examples]


def test_litm_and_source_take_a_data_name(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_DATA_DIR", str(tmp_path / "no-data"))
    for args in (["retrieve", "--litm", "lost_in_the_middle/nq-open-oracle", "--json"],
                 ["curve", "--litm", "lost_in_the_middle/nq-open-oracle", "--reader", "extractive", "--out",
                  str(tmp_path / "c")],
                 ["build", "m4le", "--source", "lost_in_the_middle/nq-open-oracle", "--out", str(tmp_path / "m.jsonl")],
                 ["build", "sweep", "--litm", "lost_in_the_middle/nq-open-oracle", "--out", str(tmp_path / "s")]):
        got = CliRunner().invoke(app, args)
        assert got.exit_code == 2, (args, got.output)
        assert "ctxcomp data get lost_in_the_middle/nq-open-oracle" in got.output, (args, got.output)


def test_retrieve_reads_a_fetched_data_name(shared_data, tmp_path):
    got = CliRunner().invoke(app, ["retrieve", "--litm", "lost_in_the_middle/nq-open-oracle", "--limit", "5",
                                   "--json", "-k", "3"])
    assert got.exit_code == 0, got.output
    (line,) = [ln for ln in got.stdout.splitlines() if ln.startswith("{")]
    assert json.loads(line)["n"] == 5


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
