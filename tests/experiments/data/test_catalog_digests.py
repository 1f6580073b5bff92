"""Every catalogue entry is pinned and carries the publisher's digest, or says why it has none; the copies this
project holds are the publisher's bytes, and each entry's `about` counts documents as runs count them."""
from __future__ import annotations

import hashlib
import re
from collections import Counter

import pytest
import yaml

from experiments.data.catalog import CATALOG, catalog
from experiments.tasks.loading import load_examples
from tests.conftest import SHARED_NAMES

GITHUB = re.compile(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/([0-9a-f]{40})/")


def _entries() -> dict[str, dict]:
    return yaml.safe_load(CATALOG.read_text(encoding="utf-8"))["files"]


def test_no_entry_lacks_a_digest_unless_it_says_why():
    for name, entry in _entries().items():
        if entry["sha256"] is None:
            # `checked` says why: "not yet: ..." or "not published: ...", with the reason after the colon
            why = str(entry.get("checked", ""))
            assert entry["size"] is None and re.match(r"not [a-z]+: \S", why), name
        else:
            assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]) and entry["size"] > 0, name


def test_every_file_from_a_git_repository_is_pinned_to_a_commit_with_its_blob():
    published = [name for name in _entries() if name.startswith(("leval/", "lost_in_the_middle/"))]
    assert len(published) == 39
    for name in published:
        entry = _entries()[name]
        assert all(GITHUB.match(url) for url in entry["urls"]), name
        assert re.fullmatch(r"[0-9a-f]{40}", entry["blob"]), name  # git's id of the bytes at that commit


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_copies_here_are_the_publishers_bytes(shared_data):
    entries = _entries()
    for name in SHARED_NAMES:
        data = catalog()[name].path(shared_data).read_bytes()
        entry = entries[name]
        assert (hashlib.sha256(data).hexdigest(), len(data), _git_blob_id(data)) == \
            (entry["sha256"], entry["size"], entry["blob"]), name


@pytest.mark.parametrize("name", [n for n in SHARED_NAMES if n.startswith("leval/")])
def test_about_counts_documents_as_runs_count_them(shared_data, name):
    """A run's n counts distinct documents (``Example.cluster``), so `ctxcomp data list` does too."""
    examples = load_examples(catalog()[name].path(shared_data))
    about = catalog()[name].about
    documents = int(re.match(r"L-Eval, (\d+) ", about).group(1))
    records = int(re.search(r" in (\d+) records", about).group(1))
    assert documents == len(Counter(e.cluster for e in examples))
    assert records == len({e.source for e in examples})
    questions = re.search(r"(\d+) (?:NQ )?questions", about)
    assert questions is None or int(questions.group(1)) == len(examples)
