"""Prompts of the newer benchmarks: LongBench v2, ∞Bench, HELMET and RULER-style tasks.

- LongBench v2 (``pred.py``): ``$DOC$`` is the context stripped, ``$Q$`` and ``$C_A..$C_D`` the stripped
  question and choices; the fields are filled in one pass, so a document that happens to hold ``$Q$`` stays as
  it is (``pred.py``'s chain of ``str.replace`` would rewrite it: the one departure).  The CoT task's second
  request is ``0shot_cot_ans.txt`` with ``$COT$`` = the first answer stripped.
- Retrieved chunks (LongBench v2's ``--rag``; ∞Bench's RAG arms): when a compressor kept some of the example's
  passages (``kept_chunks`` and ``passages`` both set), they are shown as ``Retrieved chunk i: text`` joined by
  blank lines, sorted by their position in the example (``pred.py`` sorts by ``c_idx``), and LongBench v2
  switches to ``0shot_rag.txt``.  Any compressor that keeps units of the example stands in for ``pred.py``'s
  precomputed ``retrieved_context``; the task config's ``chunks:`` cuts a long context into those units.
- ∞Bench: ``{question}``/``{input}`` are the record's ``input``, ``{OPTION_A..D}`` its options.
- HELMET RAG: the kept passages as ``Document (Title: t): text``; summarization fills ``{context}``.
- RULER: the template filled with the record's ``query``, ``type_needle_v`` and ``num_v``, the answer prefix
  after it; one query with one value uses RULER's singular wording (its four replacements, niah.py).
"""
from __future__ import annotations

import re

from compressors.base import CompressedContext
from experiments.data.long_formats import render_helmet_documents
from experiments.data.records import Example
from experiments.tasks.specs import TaskSpec

_DOLLAR = re.compile(r"\$(DOC|Q|COT|C_A|C_B|C_C|C_D)\$")
_BRACE = re.compile(r"\{(\w+)\}")
_SINGULAR = (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer"))


def _fill(pattern: re.Pattern, template: str, fields: dict[str, str]) -> str:
    return pattern.sub(lambda m: fields[m.group(1)] if m.group(1) in fields else m.group(0), template)


def retrieved_chunks(context: CompressedContext | str, example: Example) -> list[str] | None:
    """The kept units' texts in document order, or None when the compressor did not keep units of the example."""
    if isinstance(context, str) or not context.kept_chunks or not context.passages or not example.passages:
        return None
    position = {p.doc_id: i for i, p in enumerate(example.passages)}
    kept = sorted(context.passages, key=lambda p: position.get(p.doc_id, len(position)))
    return [p.text for p in kept]


def render_retrieved(chunks: list[str]) -> str:
    """LongBench v2 ``pred.py --rag``: ``Retrieved chunk {i}: {content}``, 1-based, joined by blank lines."""
    return "\n\n".join(f"Retrieved chunk {i}: {text}" for i, text in enumerate(chunks, start=1))


def _text(context: CompressedContext | str) -> str:
    return context if isinstance(context, str) else context.text


def longbench_v2_fields(example: Example, context: str = "", cot: str | None = None) -> dict[str, str]:
    fields = {"DOC": context.strip(), "Q": example.query.strip()}
    fields.update({f"C_{x}": str(example.meta.get(f"choice_{x}", "")).strip() for x in "ABCD"})
    if cot is not None:
        fields["COT"] = cot.strip()
    return fields


def family_prompt(spec: TaskSpec, context: CompressedContext | str, example: Example) -> str | None:
    """The prompt for the families of this module; None for any other family."""
    chunks = retrieved_chunks(context, example) if spec.retrieved_chunks else None
    text = render_retrieved(chunks) if chunks is not None else _text(context)
    if spec.family == "longbench_v2":
        template = spec.template("rag") if chunks is not None and "rag" in spec.variants else spec.prompt
        return _fill(_DOLLAR, template, longbench_v2_fields(example, text))
    if spec.family == "infinitebench":
        fields = {"context": text, "question": example.query, "input": example.query}
        fields.update({k: str(v) for k, v in example.meta.items() if k.startswith("OPTION_")})
        return _fill(_BRACE, spec.prompt, fields)
    if spec.family == "helmet_rag":
        passages = () if isinstance(context, str) else context.passages
        documents = render_helmet_documents(passages) if passages else _text(context)
        return _fill(_BRACE, spec.prompt, {"context": documents, "question": example.query})
    if spec.family == "helmet_summ":
        return _fill(_BRACE, spec.prompt, {"context": _text(context)})
    if spec.family == "ruler":
        template = spec.prompt
        if example.meta.get("singular"):
            for old, new in _SINGULAR:
                template = template.replace(old, new)
        fields = {"context": _text(context), "query": str(example.meta.get("query", "")),
                  "type_needle_v": str(example.meta.get("type_needle_v", "")), "num_v": str(example.meta.get("num_v", ""))}
        return _fill(_BRACE, template, fields)
    return None


def followup_prompt(spec: TaskSpec, first_answer: str, example: Example) -> str:
    """LongBench v2's second CoT request: ``0shot_cot_ans.txt`` with the question, choices and ``$COT$``."""
    return _fill(_DOLLAR, spec.template("followup"), longbench_v2_fields(example, cot=first_answer))
