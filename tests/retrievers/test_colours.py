"""A plot tells retrievers apart by colour: each registered retriever has its own, and a plugin's is none of
theirs, whatever a config calls it (a short name or an import path)."""
from __future__ import annotations

from pathlib import Path

from experiments.report.plots import line_style
from retrievers.base import PLUGIN_PALETTE
from retrievers.registry import RETRIEVERS
from retrievers.sentence_transformers import MiniLMRetriever

HERE = Path(__file__).parent


def built_in_colours() -> dict[str, str]:
    return {name: RETRIEVERS.get(name).colour() for name in RETRIEVERS.names() if not RETRIEVERS.is_plugin(name)}


def test_every_registered_retriever_has_its_own_colour():
    colours = built_in_colours()
    assert {"bm25", "contriever", "contriever-msmarco", "mcontriever", "minilm", "sentence-transformers"} <= set(colours)
    assert len(set(colours.values())) == len(colours), colours
    assert not set(colours.values()) & set(PLUGIN_PALETTE)


def test_a_line_takes_its_retrievers_colour_by_its_registered_name():
    colours = built_in_colours()
    for name, colour in colours.items():
        assert line_style("retrieval", name, "document") == (colour, "o", "--")


def test_a_plugin_retriever_gets_a_colour_no_built_in_has(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    taken = set(built_in_colours().values())

    class MyMiniLM(MiniLMRetriever):
        """A subclass is another retriever: it does not wear its parent's colour."""

    for colour in (line_style("retrieval", "plugin_example:TfidfRetriever")[0], MyMiniLM.colour(),
                   line_style("retrieval", "notinstalled.mod:Retriever")[0]):
        assert colour in PLUGIN_PALETTE and colour not in taken
