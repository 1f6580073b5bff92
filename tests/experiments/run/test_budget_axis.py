"""A budget axis in a run config: grid points and their hashes, one-line refusals, and what each prediction records
(budget, achieved tokens and ratio, over budget, the compressor's model work with cached work at its recorded time)."""
from __future__ import annotations

import json
import statistics
from collections.abc import Sequence

import pytest

from core.errors import ParamError
from experiments.report.cells import load_run
from experiments.report.tradeoff import arms, budget_table
from experiments.run.config import ConfigError, parse_config
from experiments.run.driver import Runner
from experiments.run.grid import expand_grid, short_hash
from readers.base import Generation, GenerationRequest, Reader
from readers.registry import make_reader
from readers.truncation import prompt_budget, truncate_text
from retrievers.dense import DenseRetriever
from tests.retrievers.test_shards import HashEncoder

TASK = {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 6, "num_docs": 6, "words_per_doc": 40}}


def config(**extra):
    return parse_config({"name": "b", "tasks": [TASK], "readers": ["extractive"], "batch_size": 4, **extra})


def lines(run_dir):
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def test_a_run_level_budget_is_an_axis_of_every_compressor_that_takes_one_and_full_runs_once():
    cfg = config(budget=[64, 128], compressors=["full", {"name": "truncate"},
                                                {"name": "retrieval", "params": {"top_n": [1, 2]}}])
    points = expand_grid(cfg)
    assert [(p.compressor.name, p.compressor.params.get("top_n"), p.budget and p.budget.tokens) for p in points] == [
        ("full", None, None), ("truncate", None, 64), ("truncate", None, 128), ("retrieval", 1, 64),
        ("retrieval", 1, 128), ("retrieval", 2, 64), ("retrieval", 2, 128)]
    # the budget is part of a point's hash; a point without one hashes as it always did
    full = points[0]
    assert full.config_hash == short_hash({"compressor": {"name": "full", "params": {}},
                                           "reader": {"name": "extractive", "params": {}}})
    assert points[1].config_hash == short_hash({"compressor": {"name": "truncate", "params": {}},
                                                "reader": {"name": "extractive", "params": {}},
                                                "budget": {"tokens": 64}})
    assert len({p.config_hash for p in points}) == len(points)


def test_a_compressor_section_has_its_own_axis_or_none():
    cfg = config(budget=[64, 128], compressors=[
        {"name": "truncate", "ratio": [2, 4]},
        {"name": "retrieval", "params": {"top_n": 2}, "budget": []},
        {"name": "truncate", "params": {"max_tokens": 50}, "budget": []}])
    points = expand_grid(cfg)
    assert [(p.budget.as_key() if p.budget else None) for p in points] == [{"ratio": 2.0}, {"ratio": 4.0}, None, None]


@pytest.mark.parametrize("extra, message", [
    ({"budget": [64], "ratio": [2]}, "give budget or ratio, not both"),
    ({"budget": [64, 64]}, "budget lists a value twice"),
    ({"ratio": [1]}, "greater than 1"),
    ({"budget": [0]}, "greater than 0"),
    ({"compressors": [{"name": "truncate", "budget": [8], "ratio": [2]}]}, "give budget or ratio, not both"),
])
def test_bad_axes_are_one_config_error(extra, message):
    with pytest.raises(ConfigError, match=message):
        config(**extra)


@pytest.mark.parametrize("compressor, message", [
    ({"name": "full", "budget": [64]}, "compressor 'full' takes no token budget"),
    ({"name": "truncate", "params": {"max_tokens": 20}, "budget": [64]}, "max_tokens and the budget axis"),
    ({"name": "truncate"}, "give max_tokens, or put it on a budget axis"),
])
def test_a_budget_where_none_is_taken_is_refused_before_anything_is_written(tmp_path, compressor, message):
    built = []

    def factory(name, **params):
        built.append(name)
        return make_reader(name, **params)

    with pytest.raises(ParamError, match=message) as err:
        Runner(config(compressors=[compressor]), tmp_path / "run", reader_factory=factory, progress=False)
    assert "\n" not in str(err.value) and built == [] and not (tmp_path / "run" / "config.yaml").exists()


def test_each_prediction_records_its_budget_and_the_achieved_ratio_arithmetic(tmp_path):
    Runner(config(ratio=[2, 4], compressors=["full", {"name": "truncate", "params": {"policy": "right"}}]),
           tmp_path / "run", progress=False).run()
    recs = lines(tmp_path / "run")
    full = {r["id"]: r for r in recs if r["compressor"] == "full"}
    assert "budget" not in next(iter(full.values()))  # a run without a budget writes none of the new fields
    for r in recs:
        if r["compressor"] == "full":
            continue
        ratio = 2 if r["compressor"].endswith("@1/2") else 4
        assert r["compressor"] in ("truncate(right) @1/2", "truncate(right) @1/4")
        assert r["tokens_in"] == full[r["id"]]["tokens_in"]
        assert r["budget"] == r["tokens_in"] // ratio  # floor(context tokens / ratio), from this example's context
        assert r["tokens_out"] <= r["budget"] and "over_budget" not in r
    run = load_run(tmp_path / "run")
    header, body = budget_table(arms(run))
    row = next(b for b in body if b[2] == "truncate(right)" and b[3] == "1/4")
    quarter = [r for r in recs if r["compressor"].endswith("@1/4")]
    ratios = [r["tokens_in"] / r["tokens_out"] for r in quarter]
    assert row[header.index("ratio in/out (median [range])")] == (
        f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]")
    assert row[header.index("budget tokens (median)")] == f"{statistics.median(r['budget'] for r in quarter):.0f}"
    assert row[header.index("over budget")] == f"0/{len(quarter)}"


class SlowSummarizer(Reader):
    """Writes the first sentence of each prompt as its summary and says each call took 0.7 s (it takes none)."""

    identity = "slow-summarizer"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = r.prompt.split("Text:\n", 1)[-1].split(". ")[0] + "."
            out.append(Generation(text=text, tokens_in=len(r.prompt.split()), tokens_out=len(text.split()),
                                  latency_s=0.7))
        return out


def test_cached_summaries_report_the_time_they_took_when_made_never_the_cache_hit(tmp_path):
    cfg = config(budget=[120], compressors=[{"name": "summarize", "params": {"chunk_size": 80}}])

    def factory(name, **params):
        return SlowSummarizer()

    Runner(cfg, tmp_path / "first", progress=False, reader_factory=factory).run()
    Runner(cfg, tmp_path / "second", progress=False, reader_factory=factory).run()  # every summary from the cache
    first, second = lines(tmp_path / "first"), lines(tmp_path / "second")
    for a, b in zip(first, second):
        chunks = a["compress_calls"]
        assert chunks >= 2 and "compress_cache_hits" not in a
        assert (b.get("compress_calls", 0), b["compress_cache_hits"]) == (0, chunks)
        assert a["compress_model_s"] == b["compress_model_s"] == pytest.approx(0.7 * chunks)
        assert b["compress_s"] >= 0.7 * chunks - 1e-3  # the recorded time, not the near-zero time of the hit
        assert b["compress_tokens_in"] == a["compress_tokens_in"] > 0


def test_a_dry_run_plans_every_budget_with_its_own_prompts(tmp_path):
    runner = Runner(config(budget=[32, 64], compressors=["full", {"name": "truncate"}]), tmp_path / "run", progress=False)
    try:
        rows = {r.compressor: r for r in runner.plan()}
    finally:
        runner.close()
    assert list(rows) == ["full", "truncate(middle) @32", "truncate(middle) @64"]
    assert rows["truncate(middle) @32"].prompt_tokens < rows["truncate(middle) @64"].prompt_tokens < rows["full"].prompt_tokens


def test_a_new_margin_rewrites_the_report_not_the_predictions_and_old_lines_still_read(tmp_path):
    from experiments.data.records import Prediction, parse_record

    cfg = {"name": "b", "tasks": [TASK], "readers": ["extractive"], "budget": [64],
           "compressors": ["full", {"name": "truncate"}]}
    Runner(parse_config(cfg), tmp_path / "run", progress=False).run()
    again = Runner(parse_config({**cfg, "margin": 12.5}), tmp_path / "run", progress=False).run()
    assert (again.predicted, again.already_done) == (0, 12)
    assert json.loads((tmp_path / "run" / "grid.json").read_text())["margin"] == 12.5
    old = {"task": "t", "id": "1", "config_hash": "h", "compressor": "c", "reader": "r", "prediction": "p",
           "metric": "qa_f1", "score": 1.0, "tokens_in": 90, "tokens_out": 30}  # a line written before budgets
    rec = parse_record(Prediction, old, "predictions.jsonl:1")
    assert (rec.budget, rec.over_budget, rec.context_seen, rec.compress_calls, rec.embed_hits) == (None, False, 30, 0, 0)


class WindowedEcho(Reader):
    """Middle-truncates each prompt to its window as every reader does (less ``overhead`` tokens of a template it
    wraps the prompt in), answers with what it kept, and notes the length of every whole prompt it was given."""

    max_context = 120

    def __init__(self, overhead: int = 0) -> None:
        self.whole: dict[str, int] = {}
        self.overhead = overhead

    @property
    def identity(self) -> str:
        return f"windowed-echo+{self.overhead}"  # each template its own cache entries

    def prompt_overhead(self, request: GenerationRequest) -> int:
        return self.overhead

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            room = prompt_budget(self.max_context, r.max_new_tokens) - self.overhead
            seen, cut = truncate_text(r.prompt, self.tokenizer, room, self.truncation)
            self.whole[seen] = self.count_tokens(r.prompt)
            out.append(Generation(text=seen, tokens_in=self.count_tokens(seen), tokens_out=1, truncated=cut))
        return out


@pytest.mark.parametrize("overhead", [0, 9])  # 9: a chat template's tokens also come out of the window
def test_a_reader_that_cuts_the_prompt_records_the_context_tokens_it_still_saw(tmp_path, overhead):
    cfg = parse_config({"name": "b", "tasks": [{**TASK, "max_new_tokens": 8}], "readers": ["extractive"],
                        "budget": [40], "compressors": ["full", {"name": "truncate"}]})
    reader = WindowedEcho(overhead)
    Runner(cfg, tmp_path / "run", progress=False, reader_factory=lambda name, **p: reader).run()
    recs = lines(tmp_path / "run")
    full = [r for r in recs if r["compressor"] == "full"]
    assert len(full) == 6
    for r in full:
        window = WindowedEcho.max_context - 8 - overhead  # the cut keeps the window less the answer and template
        assert r["truncated"] and reader.whole[r["prediction"]] > window
        cut = reader.whole[r["prediction"]] - window  # and falls inside the context
        assert r["tokens_seen"] == r["tokens_out"] - cut and 0 < r["tokens_seen"] < r["tokens_out"]
    rest = [r for r in recs if r["compressor"] != "full"]
    assert len(rest) == 6 and all(not r["truncated"] and "tokens_seen" not in r for r in rest)  # 40 tokens fit
    run = load_run(tmp_path / "run")
    assert {(p.id, p.context_seen) for p in run.predictions if p.compressor == "full"} == {
        (r["id"], r["tokens_seen"]) for r in full}


class SlowCachedDense(DenseRetriever):
    """Feature-hashing embeddings at 20 ms a text, through the shared embedding cache as every dense retriever."""

    def __init__(self) -> None:
        super().__init__(HashEncoder(32, delay_s=0.02))


def test_cached_embeddings_report_the_encoding_time_recorded_when_made_never_the_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # an empty embedding cache of its own
    # the slow encoder behind the retrieval compressor, by import path as a plugin retriever would be
    retriever = {"name": f"{__name__}:SlowCachedDense"}
    cfg = config(budget=[60], compressors=[{"name": "retrieval", "params": {"retriever": retriever, "chunk_size": 20}}])
    Runner(cfg, tmp_path / "first", progress=False).run()
    Runner(cfg, tmp_path / "second", progress=False).run()  # every chunk's and query's embedding from the cache
    first = {r["id"]: r for r in lines(tmp_path / "first")}
    second = {r["id"]: r for r in lines(tmp_path / "second")}
    assert first.keys() == second.keys() and len(first) == 6
    for key, a in first.items():
        b = second[key]
        texts = a["embed_texts"]
        assert texts >= 2 and a["embed_calls"] >= 1 and "embed_hits" not in a
        assert (b.get("embed_texts", 0), b.get("embed_calls", 0), b["embed_hits"]) == (0, 0, texts)
        assert a["compress_model_s"] >= 0.02 * texts - 1e-3
        assert b["compress_model_s"] == pytest.approx(a["compress_model_s"], abs=2e-3)  # as made, not as served
        assert b["compress_s"] >= b["compress_model_s"] - 1e-3
