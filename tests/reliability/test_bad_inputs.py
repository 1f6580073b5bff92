"""The bad-input corpus (``bad_inputs/``): every case is a clear one-line error naming file, line and field,
or valid input handled correctly; none yields a silently wrong score.

The table of cases and messages is in ``docs/reliability.md``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.report.cells import load_run
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from experiments.tasks.loading import DataError, load_examples
from readers.base import GenerationRequest
from readers.openai_compat import OpenAICompatReader
from testkit.fake_openai import FakeOpenAIServer

BAD = Path(__file__).resolve().parent / "bad_inputs"

# (file, 1-based line or None, field or None, what the message says)
DATA_ERRORS = [
    ("malformed.jsonl", 2, None, "malformed JSON"),
    ("missing_field.jsonl", 2, "context", "missing required field"),
    ("wrong_type.jsonl", 2, "answers", "expected list, got str"),
    ("wrong_type_length.jsonl", 2, "length", "expected int, got str"),
    ("non_utf8.jsonl", 2, None, "not valid UTF-8"),
    ("not_an_object.jsonl", 2, None, "expected a JSON object"),
    ("does_not_exist.jsonl", None, None, "file not found"),
]
EMPTY_CONTEXTS = [
    ("empty_context.jsonl", 2, "context", "empty"),
    ("whitespace_context.jsonl", 2, "context", "empty"),
]


def _where(name: str, line: int | None) -> str:
    return f"{BAD / name}:{line}" if line is not None else str(BAD / name)


@pytest.mark.parametrize(("name", "line", "field", "problem"), DATA_ERRORS + EMPTY_CONTEXTS)
def test_loader_names_file_line_and_field(name, line, field, problem):
    with pytest.raises(DataError) as info:
        load_examples(BAD / name, "longbench", "hotpotqa")
    message = str(info.value)
    assert message.startswith(_where(name, line))
    if field is not None:
        assert f"field {field!r}" in message
    assert problem in message


def _data_config(tmp_path: Path, name: str, compressor: str | dict = "full") -> Path:
    config = {"tasks": [{"name": "hotpotqa", "path": str(BAD / name)}], "compressors": [compressor],
              "readers": ["extractive"]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "line", "field", "problem"), DATA_ERRORS + EMPTY_CONTEXTS)
def test_cli_run_on_a_bad_data_file_exits_2_with_one_line(tmp_path, cli, rel, name, line, field, problem):
    result = cli("run", _data_config(tmp_path, name), "--out", tmp_path / "run")
    needles = [_where(name, line), problem] + ([f"field {field!r}"] if field else [])
    rel.assert_user_error(result, *needles)
    assert not (tmp_path / "run" / "predictions.jsonl").exists() or not (tmp_path / "run" / "predictions.jsonl").read_text()


# -- empty query: valid for query-less tasks, refused (and never scored) by retrieval ------------------------


def _run_in_process(tmp_path: Path, name: str, compressor) -> Path:
    config = parse_config({"tasks": [{"name": "hotpotqa", "path": str(BAD / name)}], "compressors": [compressor],
                           "readers": ["extractive"]})
    run_dir = tmp_path / "run"
    Runner(config, run_dir, progress=False).run()
    return run_dir


def test_empty_query_with_full_context_is_predicted(tmp_path, rel, fresh_cache):
    fresh_cache("full")
    run_dir = _run_in_process(tmp_path, "empty_query.jsonl", "full")
    assert len(rel.read_jsonl(run_dir / "predictions.jsonl")) == 2
    assert rel.read_jsonl(run_dir / "failures.jsonl") == []


def test_empty_query_under_retrieval_is_a_recorded_failure_not_a_score(tmp_path, rel, fresh_cache):
    fresh_cache("retrieval")
    retrieval = {"name": "retrieval", "params": {"retriever": "bm25", "top_n": 1, "chunk_size": 20}}
    run_dir = _run_in_process(tmp_path, "empty_query.jsonl", retrieval)
    preds = rel.read_jsonl(run_dir / "predictions.jsonl")
    (failure,) = rel.read_jsonl(run_dir / "failures.jsonl")
    assert [p["id"] for p in preds] == ["id1"]
    assert (failure["id"], failure["stage"]) == ("id2", "compress")
    assert "empty query" in failure["reason"]
    # Only id1 is scored.  The extractive reader answers with its best sentence, "Passage: The capital of
    # country 1 is City1."; LongBench's qa_f1 against "City1": 7 normalised tokens, 1 shared, so
    # P = 1/7, R = 1, F1 = 2PR / (P + R) = 0.25 -> 25.0.  The failed id2 is not averaged in as 0.
    (cell,) = load_run(run_dir).cells
    assert preds[0]["prediction"] == "Passage: The capital of country 1 is City1."
    assert (cell.n, cell.n_failed, cell.score) == (1, 1, 25.0)


# -- unknown names: close-match suggestions, in the library and through the CLI ------------------------------


@pytest.mark.parametrize(
    ("factory", "typo", "suggestion"),
    [
        ("experiments.tasks:get_task", "hotpotqaa", "hotpotqa"),
        ("retrievers.registry:make_retriever", "bm52", "bm25"),
        ("readers.registry:make_reader", "opneai", "openai"),
        ("compressors.registry:make_compressor", "retreival", "retrieval"),
    ],
)
def test_unknown_names_suggest_the_close_match(factory, typo, suggestion):
    import pkgutil

    with pytest.raises(KeyError) as info:
        pkgutil.resolve_name(factory)(typo)
    message = str(info.value.args[0])
    assert typo in message and "did you mean" in message.lower() and suggestion in message


def test_unknown_chunker_suggests_the_close_match():
    from indexes.chunking import make_chunker

    with pytest.raises(KeyError, match="Did you mean 'longbench'"):
        make_chunker("longbnch", 100)


@pytest.mark.parametrize(
    ("config", "typo", "suggestion"),
    [
        ("unknown_task.yaml", "hotpotqaa", "hotpotqa"),
        ("unknown_retriever.yaml", "bm52", "bm25"),
        ("unknown_reader.yaml", "opneai", "openai"),
        ("unknown_compressor.yaml", "retreival", "retrieval"),
    ],
)
def test_cli_unknown_names_exit_2_with_a_suggestion(tmp_path, cli, rel, config, typo, suggestion):
    line = rel.assert_user_error(cli("run", BAD / config, "--out", tmp_path / "run"), typo, suggestion)
    assert "did you mean" in line.lower()


# -- config files ------------------------------------------------------------------------------------------------

CONFIG_ERRORS = [
    ("wrong_type_key.yaml", "batch_size", "valid integer"),
    ("unknown_key.yaml", "batch_sise", "unknown key"),
]


@pytest.mark.parametrize(("config", "key", "problem"), CONFIG_ERRORS)
def test_config_errors_are_one_line_naming_file_and_key(tmp_path, cli, rel, config, key, problem):
    rel.assert_user_error(cli("run", BAD / config, "--out", tmp_path / "run"), str(BAD / config), key, problem)


def test_malformed_yaml_names_file_and_line(tmp_path, cli, rel):
    rel.assert_user_error(cli("run", BAD / "malformed.yaml", "--out", tmp_path / "run"), f"{BAD / 'malformed.yaml'}:4")


def test_unknown_reader_parameter_is_a_clear_error(tmp_path, cli, rel):
    rel.assert_user_error(cli("run", BAD / "unknown_reader_param.yaml", "--out", tmp_path / "run"), "temprature")


def test_paths_that_do_not_exist(tmp_path, cli, rel):
    rel.assert_user_error(cli("run", BAD / "nope.yaml", "--out", tmp_path / "run"), str(BAD / "nope.yaml"), "not found")
    rel.assert_user_error(cli("run", "--resume", tmp_path / "no-run"), str(tmp_path / "no-run"))
    rel.assert_user_error(cli("run", BAD / "missing_data_path.yaml", "--out", tmp_path / "run2"),
                          "does_not_exist.jsonl", "file not found")
    rel.assert_user_error(cli("report", tmp_path / "no-run"), str(tmp_path / "no-run"))
    rel.assert_user_error(cli("score", BAD / "nope.jsonl", "--dataset", "hotpotqa"), str(BAD / "nope.jsonl"))
    rel.assert_user_error(cli("chunk", BAD / "nope.txt"), str(BAD / "nope.txt"))


# -- ctxcomp score -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "line", "field", "problem"),
    [
        ("preds_missing_field.jsonl", 2, "pred", "missing required field"),
        ("preds_wrong_type.jsonl", 2, "pred", "expected str, got list"),
        ("preds_malformed.jsonl", 2, None, "malformed JSON"),
        ("preds_non_utf8.jsonl", 2, None, "not valid UTF-8"),
    ],
)
def test_cli_score_bad_prediction_files(cli, rel, name, line, field, problem):
    needles = [_where(name, line), problem] + ([f"field {field!r}"] if field else [])
    rel.assert_user_error(cli("score", BAD / name, "--dataset", "hotpotqa"), *needles)


def test_cli_score_unknown_dataset_suggests(cli, rel):
    rel.assert_user_error(cli("score", BAD / "preds_wrong_type.jsonl", "--dataset", "hotpotqaa"), "hotpotqa")


# -- ctxcomp chunk and valid-but-awkward text ----------------------------------------------------------------------


def test_cli_chunk_non_utf8_names_the_file(cli, rel):
    rel.assert_user_error(cli("chunk", BAD / "non_utf8.txt"), str(BAD / "non_utf8.txt"), "UTF-8")


def test_cli_chunk_empty_file_names_the_file(cli, rel):
    rel.assert_user_error(cli("chunk", BAD / "empty.txt"), str(BAD / "empty.txt"), "empty")


def test_cli_chunk_unknown_chunker_suggests(cli, rel):
    rel.assert_user_error(cli("chunk", BAD / "long_sentence.txt", "--chunker", "lngbench"), "'longbench'")


def _chunks(cli, name: str, size: int) -> list[dict]:
    result = cli("chunk", BAD / name, "--size", str(size))
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_chinese_mixed_script_emoji_and_zero_width_text_chunks_exactly(cli):
    text = (BAD / "chinese_mixed.txt").read_text(encoding="utf-8")
    chunks = _chunks(cli, "chinese_mixed.txt", 10)
    assert len(chunks) > 3
    for c in chunks:
        assert text[c["start"]:c["end"]] == c["text"]
    for a, b in zip(chunks, chunks[1:]):
        assert a["end"] <= b["start"] and text[a["end"]:b["start"]].strip() == ""
    joined = "".join(c["text"] for c in chunks)
    for piece in ("👨\u200d👩\u200d👧", "\u200b", "\u200c", "Москва", "🐼", "広州"):
        assert piece in joined, f"{piece!r} lost by the chunker"


def test_chinese_mixed_script_text_retrieves_the_right_chunk():
    from indexes.chunking import make_chunker
    from retrievers.registry import make_retriever

    text = (BAD / "chinese_mixed.txt").read_text(encoding="utf-8")
    chunks = make_chunker("longbench", 10).split(text, "zh")
    retriever = make_retriever("bm25").index(chunks)
    queries = {"成都的熊猫可爱吗": "熊猫", "Москва столица": "Москва", "杭州生活": "杭州", "深圳的科技公司": "深圳"}
    hits = retriever.search(list(queries), k=1)
    for (query, expected), (top,) in zip(queries.items(), hits):
        assert expected in top.chunk.text, (query, top.chunk.text)


def test_an_over_long_sentence_becomes_its_own_chunk(cli):
    text = (BAD / "long_sentence.txt").read_text(encoding="utf-8")
    chunks = _chunks(cli, "long_sentence.txt", 50)
    long_words = {f"w{i}" for i in range(300)}
    holders = [c for c in chunks if long_words & set(c["text"].replace(".", " ").split())]
    assert len(holders) == 1, "the 300-word sentence must not be split across chunks"
    (holder,) = holders
    assert set(holder["text"].replace(".", " ").split()) == long_words, "nothing else joins the over-long sentence"
    assert text[holder["start"]:holder["end"]] == holder["text"]


def test_a_document_larger_than_the_reader_context_is_truncated_and_flagged(tmp_path, rel, fresh_cache):
    fresh_cache("long")
    long_doc = load_examples(BAD / "long_document.jsonl", "longbench", "hotpotqa")[0].context
    with FakeOpenAIServer() as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, max_context=512, timeout_s=1.0, retry=rel.FAST_RETRY)
        (gen,) = reader.generate([GenerationRequest(prompt=long_doc + "\nQuestion: capital?", max_new_tokens=32)])
        reader.close()
        assert gen.ok and gen.truncated
        assert gen.tokens_in <= 512 - 32 < len(long_doc.split())

        config = {"tasks": [{"name": "hotpotqa", "path": str(BAD / "long_document.jsonl")}],
                  "readers": [rel.openai_reader(server.base_url, max_context=512)]}
        run_dir = tmp_path / "run"
        Runner(parse_config(config), run_dir, progress=False).run()
    (rec,) = rel.read_jsonl(run_dir / "predictions.jsonl")
    assert rec["truncated"] is True
    assert rec["reader_tokens_in"] <= 512 - 32 < rec["tokens_in"]
