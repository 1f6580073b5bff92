"""A passage corpus is streamed (TSV, JSON lines, Parquet) into an on-disk store read by row number; a build
killed partway continues, and the DPR Wikipedia file is fetched by name (from a local server: no network)."""
from __future__ import annotations

import dataclasses
import gzip
import json

import numpy as np
import pytest

from experiments.data.catalog import entry
from experiments.data.fetch import fetch
from experiments.data.sources import DataError
from experiments.protocols.corpus_stream import iter_corpus, open_corpus
from indexes.passages import PassageStore, build_store, partial_path
from tests.support.file_server import FileServer

ROWS = [(str(i + 1), f'passage {i} says "hello"\tin words {i * 7}', f"Title {i % 13}") for i in range(1000)]


def _tsv(rows) -> bytes:
    """DPR's layout: a header, tab-separated, text quoted as csv writes it."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["id", "text", "title"])
    writer.writerows(rows)
    return out.getvalue().encode()


@pytest.fixture
def corpora(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tsv = tmp_path / "c.tsv.gz"
    tsv.write_bytes(gzip.compress(_tsv(ROWS)))
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "text": t, "title": ti}) + "\n" for i, t, ti in ROWS))
    parquet = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [r[0] for r in ROWS], "text": [r[1] for r in ROWS], "title": [r[2] for r in ROWS]}),
                   parquet, row_group_size=100)
    return {"tsv": tsv, "jsonl": jsonl, "parquet": parquet}


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "parquet"])
def test_every_format_gives_the_same_rows_in_order(corpora, fmt):
    assert list(iter_corpus(corpora[fmt])) == ROWS


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "parquet"])
def test_the_store_is_built_by_streaming_never_holding_more_than_a_block(corpora, tmp_path, fmt):
    read = [0]

    def counted():
        for row in iter_corpus(corpora[fmt]):
            read[0] += 1
            yield row

    seen = []

    def on_block(stored: int) -> None:  # rows read so far never run more than one block ahead of the store
        seen.append((stored, read[0]))
        assert read[0] - stored <= 1

    build = build_store(tmp_path / f"{fmt}.sqlite", counted, source=fmt, block=100, on_block=on_block)
    assert [s for s, _ in seen] == list(range(100, 1001, 100)) and read[0] == 1000
    store = build.store
    assert len(store) == 1000 and build.built and build.resumed_at == 0
    got = store.get(np.array([999, 0, 500, 0], dtype=np.int64))
    assert [(p.doc_id, p.text, p.title) for p in got] == [ROWS[999], ROWS[0], ROWS[500], ROWS[0]]
    assert [p.row for p in got] == [999, 0, 500, 0]
    with pytest.raises(ValueError, match="no row 1000"):
        store.get([1000])


def test_a_killed_build_leaves_no_store_and_the_next_run_continues_or_starts_over(corpora, tmp_path):
    target = tmp_path / "s.sqlite"

    def killed_after(n):
        def rows():
            for i, row in enumerate(iter_corpus(corpora["tsv"])):
                if i == n:
                    raise KeyboardInterrupt
                yield row
        return rows

    with pytest.raises(KeyboardInterrupt):
        build_store(target, killed_after(250), source="a", block=100)
    assert not target.exists() and partial_path(target).is_file()
    with pytest.raises(Exception):
        PassageStore(partial_path(target))  # an unfinished store is never taken for a finished one
    again = build_store(target, lambda: iter_corpus(corpora["tsv"]), source="a", block=100)
    assert again.resumed_at == 200 and "continued an interrupted build at row 200" in again.describe()
    assert [(p.doc_id, p.text, p.title) for b in again.store.blocks(300) for p in b] == ROWS
    assert not partial_path(target).exists()
    assert build_store(target, lambda: iter_corpus(corpora["tsv"]), source="a").built is False

    target2 = tmp_path / "t.sqlite"
    with pytest.raises(KeyboardInterrupt):
        build_store(target2, killed_after(150), source="a", block=100)
    other = build_store(target2, lambda: iter_corpus(corpora["jsonl"]), source="b", block=100)
    assert other.resumed_at == 0 and "started over (the partial file t.sqlite.partial is of another source)" \
        in other.describe()
    assert len(other.store) == 1000


def test_bad_rows_are_one_line_errors_naming_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(_tsv(ROWS[:3]) + b"9\t \tT\n")
    with pytest.raises(DataError, match=r"bad\.tsv:5: field 'text': is empty"):
        list(iter_corpus(bad))
    short = tmp_path / "short.tsv"
    short.write_bytes(b"id\ttext\ttitle\n1\tonly text\n")
    with pytest.raises(DataError, match=r"short\.tsv:2: field 'title': missing"):
        list(iter_corpus(short))
    nohead = tmp_path / "nohead.tsv"
    nohead.write_bytes(b"id\tbody\n1\tx\n")
    with pytest.raises(DataError, match=r"nohead\.tsv:1: field 'text': missing column"):
        list(iter_corpus(nohead))
    with pytest.raises(DataError, match="unknown corpus format"):
        list(iter_corpus(tmp_path / "x.csv")) if (tmp_path / "x.csv").write_text("a") else None


def test_wikipedia_is_fetched_by_name_and_opened_as_a_store(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))
    real = entry("wikipedia-dpr-100w")
    assert real.urls == ("https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz",)
    assert real.sha256 is None and "download_data.py" in real.checked  # DPR publishes no checksum
    body = gzip.compress(_tsv(ROWS[:50]))
    with FileServer({"/dpr/wikipedia_split/psgs_w100.tsv.gz": body}) as server:
        item = dataclasses.replace(real, urls=(server.url("/dpr/wikipedia_split/psgs_w100.tsv.gz"),))
        done = fetch(item, tmp_path / "data", progress=False)
    assert done.status == "downloaded" and done.path.name == "wikipedia-dpr-100w.tsv.gz" and done.sha256
    lines = []
    store = open_corpus("wikipedia-dpr-100w", progress=False, say=lines.append)
    assert len(store) == 50 and store.get([49])[0].doc_id == "50"
    assert lines and "50 passages" in lines[0]
    again = []
    open_corpus("wikipedia-dpr-100w", progress=False, say=again.append)
    assert "already built" in again[0]


def _plain_tsv(rows) -> bytes:
    """Tab-separated lines with no csv quoting: a text may start with a quote it never closes."""
    return ("id\ttext\ttitle\n" + "".join(f"{i}\t{t}\t{ti}\n" for i, t, ti in rows)).encode()


PLAIN = [(str(i + 1), f'"quoted start {i}" then more words' if i % 100 == 7 else f"passage {i}", f"T{i}")
         for i in range(1000)]


def test_an_unquoted_file_is_refused_at_its_line_in_csv_mode_and_read_exactly_as_plain_lines(tmp_path):
    path = tmp_path / "plain.tsv"
    path.write_bytes(_plain_tsv(PLAIN))
    with pytest.raises(DataError, match=r"plain\.tsv:9: not csv-quoted.*--corpus-quoting none") as err:
        list(iter_corpus(path))
    assert len(str(err.value)) < 400  # an excerpt, not the line
    assert list(iter_corpus(path, quoting="none")) == PLAIN
    lines = []
    store = open_corpus(path, store=tmp_path / "s.sqlite", progress=False, say=lines.append, quoting="none")
    assert len(store) == 1000 and "1,000 passages from 1,000 data lines" in lines[0]
    assert store.get([8])[0].text == PLAIN[8][1]


def test_ids_are_unique_and_not_blank_and_a_duplicate_names_both_lines(tmp_path):
    dup = tmp_path / "dup.tsv"
    dup.write_bytes(_tsv(ROWS[:5] + [("3", "again", "T")] + ROWS[5:10]))
    with pytest.raises(DataError, match=r"dup\.tsv:7: field 'id': '3' is a duplicate of line 4"):
        list(iter_corpus(dup))
    jsonl = tmp_path / "dup.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "text": "x"}) + "\n" for i in [1, 2, 1]))
    with pytest.raises(DataError, match=r"dup\.jsonl:3: field 'id': '1' is a duplicate of line 1"):
        list(iter_corpus(jsonl))
    for bad, problem in (("", "is empty"), (" 7", "surrounding whitespace")):
        path = tmp_path / "ids.tsv"
        path.write_bytes(_tsv(ROWS[:2] + [(bad, "text", "T")]))
        with pytest.raises(DataError, match=rf"ids\.tsv:4: field 'id': .*{problem}.*unique in the corpus"):
            list(iter_corpus(path))
    words = tmp_path / "words.tsv"  # ids need not be integers
    words.write_bytes(_tsv([("doc-a", "x", "T"), ("doc-b", "y", "T")]))
    assert [r[0] for r in iter_corpus(words)] == ["doc-a", "doc-b"]


def test_bad_utf8_names_the_line_and_the_file_offset_and_a_bad_header_is_quoted_short(tmp_path):
    head = _tsv(ROWS[:500])
    path = tmp_path / "u.tsv"
    path.write_bytes(head + b"501\tbad \xff byte\tT\n")
    with pytest.raises(DataError, match=rf"u\.tsv:502: not valid UTF-8 .* at byte {len(head) + 8:,} of the file"):
        list(iter_corpus(path))
    wide = tmp_path / "wide.tsv"
    wide.write_bytes(("1\t" + "word " * 140 + "\tTitle\n").encode())
    with pytest.raises(DataError) as err:
        list(iter_corpus(wide))
    assert "wide.tsv:1: field 'id': missing column" in str(err.value) and len(str(err.value)) < 300


def test_a_csv_quoted_newline_is_one_passage_and_the_count_says_so(tmp_path):
    rows = ROWS[:3] + [("4", 'two\nlines, "quoted"', "T")] + ROWS[4:6]
    path = tmp_path / "nl.tsv"
    path.write_bytes(_tsv(rows))
    assert list(iter_corpus(path)) == rows
    lines = []
    open_corpus(path, store=tmp_path / "s.sqlite", progress=False, say=lines.append)
    assert "6 passages from 7 data lines (1 more lines: csv-quoted newlines)" in lines[0]
    unclosed = tmp_path / "unclosed.tsv"  # no closing quote: never joined to the lines after it
    unclosed.write_bytes(_plain_tsv([("1", "a", "T"), ("2", '"never closed', "T")] + PLAIN[2:40]))
    with pytest.raises(DataError, match=r"unclosed\.tsv:3: not csv-quoted .*read across \d+ lines"):
        list(iter_corpus(unclosed))


def _jsonl(rows) -> bytes:
    return "".join(json.dumps({"id": i, "text": t, "title": ti}) + "\n" for i, t, ti in rows).encode()


BAD_TEXT = "passage 501 " + "word " * 30 + "bad @@ byte " + "tail " * 40  # @@ becomes the lone byte 0xff


@pytest.mark.parametrize("name", ["u.tsv", "u.tsv.gz", "u.jsonl", "u.jsonl.gz"])
def test_bad_utf8_names_the_line_the_offset_in_the_file_and_a_short_excerpt_in_every_line_format(tmp_path, name):
    """A bad byte on line 502 (TSV: the header and 500 rows before it; JSONL: 501 rows): the offset is in the
    (uncompressed) file, not the line, and the excerpt around the byte is at most 60 characters."""
    rows = ROWS[:501] + [("502", BAD_TEXT, "T")] + ROWS[502:510]
    body = (_tsv(rows[1:]) if name.startswith("u.tsv") else _jsonl(rows)).replace(b"@@", b"\xff")
    path = tmp_path / name
    path.write_bytes(gzip.compress(body) if name.endswith(".gz") else body)
    offset, line_start = body.index(b"\xff"), body.index(b"502\t" if name.startswith("u.tsv") else b'{"id": "502"')
    assert body[:line_start].count(b"\n") == 501
    of = "of the uncompressed file" if name.endswith(".gz") else "of the file"
    with pytest.raises(DataError) as err:
        list(iter_corpus(path))
    message = str(err.value)
    assert message.startswith(f"{path}:502: not valid UTF-8 (invalid start byte) at byte {offset:,} {of} (byte "
                              f"{offset - line_start:,} of the line), near '")
    at = BAD_TEXT.index("@@")  # 30 characters before the bad byte, 30 from it on: 60 in all
    assert message.endswith(f"near {BAD_TEXT[at - 30:at] + chr(0xfffd) + BAD_TEXT[at + 2:at + 31]!r}")


def test_bad_utf8_in_a_parquet_string_names_the_row_the_field_and_the_byte_of_the_value(tmp_path):
    """Parquet keeps no lines and encodes its pages: the row, the field and the byte within the value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [t.encode() for _, t, _ in ROWS[:20]]
    texts[13] = b"passage 13 has a bad \xff byte " + b"and then many more words " * 10
    offsets = np.cumsum([0] + [len(t) for t in texts]).astype(np.int32)
    text = pa.Array.from_buffers(pa.string(), len(texts), [None, pa.py_buffer(offsets.tobytes()),
                                                           pa.py_buffer(b"".join(texts))])  # unchecked, as a writer may
    path = tmp_path / "u.parquet"
    pq.write_table(pa.table({"id": [r[0] for r in ROWS[:20]], "text": text}), path, row_group_size=8)
    with pytest.raises(DataError) as err:
        list(iter_corpus(path))
    message = str(err.value)
    assert message == (f"{path}:14: field 'text': not valid UTF-8 (invalid start byte) at byte 21 of the value, "
                       "near 'passage 13 has a bad \ufffd byte and then many more word'")  # 21 before, 30 from it


def test_a_jsonl_id_is_a_string_or_an_integer_never_true_and_a_long_bad_id_is_quoted_short(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"id": 1, "text": "x"}) + "\n" + json.dumps({"id": True, "text": "y"}) + "\n")
    with pytest.raises(DataError, match=r"ids\.jsonl:2: field 'id': expected str or int, got bool"):
        list(iter_corpus(path))  # read as the id 'True' before
    path.write_text(json.dumps({"id": " " + "a" * 300, "text": "x"}) + "\n")
    with pytest.raises(DataError) as err:
        list(iter_corpus(path))
    assert "ids.jsonl:1: field 'id': ' aaa" in str(err.value) and "a" * 61 not in str(err.value)
