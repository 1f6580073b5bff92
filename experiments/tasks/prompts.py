"""Prompts: a pure function of (task, compressed context, example, options), so a prompt hash identifies a generation.

Long contexts are inserted byte for byte: templates are filled by replacing
their known fields, never by ``str.format`` on user text, so braces in a
context or query are safe.  A benchmark whose prompts are more than its template with ``{context}`` and
``{input}`` filled builds them itself (its ``Benchmark.prompt``); the helpers here are what they share.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

from compressors.base import CompressedContext
from core.errors import UserError
from experiments.data.records import Example
from experiments.tasks.benchmark import benchmark_of
from experiments.tasks.specs import TaskSpec
from readers.base import GenerationRequest

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class PromptOptions:
    """Per-task switches from the run config.

    ``query_aware``: Lost in the Middle's query-aware contextualization (the
    question also before the documents).  ``length_instruction``: L-Eval's
    output-length sentence; ``None`` follows the task (on for L-Eval's
    open-ended tasks, as the released baselines do).  ``max_new_tokens``
    overrides the task's.
    """

    query_aware: bool = False
    length_instruction: bool | None = None
    max_new_tokens: int | None = None


def fill_template(template: str, **fields: str) -> str:
    """Replace ``{name}`` for the given fields only; any other text (and the values, which are never formatted)
    stays verbatim, so a document holding ``{x}`` or a template holding code braces is safe."""
    return _FIELD.sub(lambda m: fields[m.group(1)] if m.group(1) in fields else m.group(0), template)


def text_of(context: CompressedContext | str) -> str:
    return context if isinstance(context, str) else context.text


def retrieved_chunks(context: CompressedContext | str, example: Example) -> list[str] | None:
    """The kept units' texts in document order (LongBench v2's ``pred.py`` sorts by ``c_idx``), or None when the
    compressor did not keep units of the example."""
    if isinstance(context, str) or not context.kept_chunks or not context.passages or not example.passages:
        return None
    position = {p.doc_id: i for i, p in enumerate(example.passages)}
    kept = sorted(context.passages, key=lambda p: position.get(p.doc_id, len(position)))
    return [p.text for p in kept]


def render_retrieved(chunks: list[str]) -> str:
    """LongBench v2 ``pred.py --rag``: ``Retrieved chunk {i}: {content}``, 1-based, joined by blank lines."""
    return "\n\n".join(f"Retrieved chunk {i}: {text}" for i, text in enumerate(chunks, start=1))


def context_text(spec: TaskSpec, context: CompressedContext | str, example: Example) -> tuple[str, bool]:
    """The text that fills a template's context, and whether it is the kept chunks: a task with
    ``retrieved_chunks`` shows a compressor's kept units of the example as ``Retrieved chunk i: ...``."""
    chunks = retrieved_chunks(context, example) if spec.retrieved_chunks else None
    return (render_retrieved(chunks), True) if chunks is not None else (text_of(context), False)


def length_sentence(spec: TaskSpec, example: Example) -> str:
    """L-Eval's "The suggested output length is around N words." with N the reference's word count."""
    words = example.meta.get("reference_words")
    if words is None:
        words = len(example.answers[0].split()) if example.answers else 0
    return spec.length_sentence.format(n=words)


def build_prompt(spec: TaskSpec, context: CompressedContext | str, example: Example,
                 options: PromptOptions = PromptOptions()) -> str:
    """The user prompt for one example, as the task's benchmark builds it (:func:`template_prompt` unless it
    builds its own)."""
    own = benchmark_of(spec.family).prompt
    return own(spec, context, example, options) if own is not None else template_prompt(spec, context, example, options)


def template_prompt(spec: TaskSpec, context: CompressedContext | str, example: Example,
                    options: PromptOptions = PromptOptions()) -> str:
    """``spec.prompt`` with ``{context}`` and ``{input}`` filled (LongBench, L-Eval, M4LE: their templates already
    state the instruction before and after the context, so ``query_aware`` changes nothing), the query followed
    by L-Eval's length sentence where the task or the options ask for it."""
    query = example.query
    wants_length = spec.length_instruction if options.length_instruction is None else options.length_instruction
    if wants_length:
        if not spec.length_sentence:
            raise UserError(f"task {spec.name!r} has no length instruction (only L-Eval's tasks do)")
        query = f"{query} {length_sentence(spec, example)}"
    return fill_template(spec.prompt, context=context_text(spec, context, example)[0], input=query)


# Two one-character stand-ins for the context (Unicode private use: no template or rendering holds them); they
# differ in their only character, so two prompts built with them differ exactly where the context goes.
_STAND_INS = ("\ue000", "\ue001")


def _stand_in(context: CompressedContext | str, mark: str) -> CompressedContext | str:
    """``context`` with its text, and each kept passage's text and title, replaced by ``mark``: the same shape (kept
    units, passages, titles present or not), so the family picks the same template for it."""
    if isinstance(context, str):
        return mark
    passages = tuple(dataclasses.replace(p, text=mark, title=mark if p.title else "") for p in context.passages)
    return dataclasses.replace(context, text=mark, passages=passages)


def context_span(spec: TaskSpec, context: CompressedContext | str, example: Example, prompt: str,
                 options: PromptOptions = PromptOptions()) -> tuple[int, int] | None:
    """Where the context sits in ``prompt`` (``build_prompt``'s output), as ``(start, end)`` character offsets.

    Found without knowing the family: the prompt is built twice more with one-character stand-ins for the
    context; what the two share before and after the stand-ins is the template around the context, and
    ``prompt`` holds that same text before and after its context.  An empty context (closed book) is the
    empty span ``(0, 0)``: nothing to read.  None when the template around the context is not found (a
    family whose template changes with the context's content).
    """
    if not text_of(context).strip() and (isinstance(context, str) or not context.passages):
        return (0, 0)
    a, b = (build_prompt(spec, _stand_in(context, mark), example, options) for mark in _STAND_INS)
    head = len(os.path.commonprefix([a, b]))
    tail = len(os.path.commonprefix([a[head:][::-1], b[head:][::-1]]))
    start, end = head, len(prompt) - tail
    if start > end or not prompt.startswith(a[:head]) or not prompt.endswith(a[len(a) - tail:]):
        return None
    return (start, end)


def build_request(spec: TaskSpec, context: CompressedContext | str, example: Example,
                  options: PromptOptions = PromptOptions(), *, with_span: bool = True) -> GenerationRequest:
    """The reader request for one example: the prompt, the system message, max new tokens, the chat switch, and
    where the context sits in the prompt (``context_span``: what a context-only baseline may read; a dry run that
    only counts the prompt leaves it out with ``with_span=False``)."""
    prompt = build_prompt(spec, context, example, options)
    return GenerationRequest(
        prompt=prompt,
        max_new_tokens=options.max_new_tokens or spec.max_new_tokens,
        chat=spec.chat,
        system=spec.system,
        context_span=context_span(spec, context, example, prompt, options) if with_span else None,
        prompt_version=spec.prompt_version,
    )


def build_followup_request(spec: TaskSpec, first_answer: str, example: Example) -> GenerationRequest | None:
    """The second request of a two-step task (LongBench v2's CoT: the answer prompt with the reasoning in it),
    or None for a one-step task."""
    followup = benchmark_of(spec.family).followup
    if "followup" not in spec.variants or followup is None:
        return None
    return GenerationRequest(prompt=followup(spec, first_answer, example),
                             max_new_tokens=spec.followup_max_new_tokens or spec.max_new_tokens, chat=spec.chat,
                             system=spec.system, prompt_version=spec.prompt_version)
