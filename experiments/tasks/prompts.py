"""Prompts: a pure function of (task, compressed context, example, options), so a prompt hash identifies a generation.

Long contexts are inserted byte for byte: templates are filled by replacing
their known fields, never by ``str.format`` on user text, so braces in a
context or query are safe.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from compressors.base import CompressedContext
from core.errors import UserError
from experiments.data.records import Example, render_litm_documents, render_litm_kv
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


def _text_of(context: CompressedContext | str) -> str:
    return context if isinstance(context, str) else context.text


def _litm_qa(spec: TaskSpec, context: CompressedContext | str, query: str, query_aware: bool) -> str:
    passages = () if isinstance(context, str) else context.passages
    documents = render_litm_documents(passages) if passages else _text_of(context)
    if not documents.strip():
        return fill_template(spec.template("closed_book"), question=query)
    template = spec.template("query_aware" if query_aware else "default")
    return fill_template(template, search_results=documents, question=query)


def _litm_kv(spec: TaskSpec, context: CompressedContext | str, query: str, query_aware: bool) -> str:
    passages = () if isinstance(context, str) else context.passages
    data = render_litm_kv(p.text for p in passages) if passages else _text_of(context)
    template = spec.template("query_aware" if query_aware else "default")
    return fill_template(template, formatted_kv_records=data, key=query)


def length_sentence(spec: TaskSpec, example: Example) -> str:
    """L-Eval's "The suggested output length is around N words." with N the reference's word count."""
    words = example.meta.get("reference_words")
    if words is None:
        words = len(example.answers[0].split()) if example.answers else 0
    return spec.length_sentence.format(n=words)


def build_prompt(spec: TaskSpec, context: CompressedContext | str, example: Example,
                 options: PromptOptions = PromptOptions()) -> str:
    """The user prompt for one example.

    LongBench, L-Eval and M4LE fill ``spec.prompt`` (LongBench's templates
    already state the instruction before and after the context, so
    ``query_aware`` changes nothing there).  Lost in the Middle tasks render
    the kept passages as documents / JSON pairs in the paper's prompt files.
    """
    from experiments.tasks.formats import family_prompt

    newer = family_prompt(spec, context, example)
    if newer is not None:
        return newer
    query = example.query
    if spec.family == "litm_qa":
        return _litm_qa(spec, context, query, options.query_aware)
    if spec.family == "litm_kv":
        return _litm_kv(spec, context, query, options.query_aware)
    wants_length = spec.length_instruction if options.length_instruction is None else options.length_instruction
    if wants_length:
        if not spec.length_sentence:
            raise UserError(f"task {spec.name!r} has no length instruction (only L-Eval's tasks do)")
        query = f"{query} {length_sentence(spec, example)}"
    return fill_template(spec.prompt, context=_text_of(context), input=query)


def build_request(spec: TaskSpec, context: CompressedContext | str, example: Example,
                  options: PromptOptions = PromptOptions()) -> GenerationRequest:
    """The reader request for one example: the prompt, the system message, max new tokens and the chat switch."""
    return GenerationRequest(
        prompt=build_prompt(spec, context, example, options),
        max_new_tokens=options.max_new_tokens or spec.max_new_tokens,
        chat=spec.chat,
        system=spec.system,
    )


def build_followup_request(spec: TaskSpec, first_answer: str, example: Example) -> GenerationRequest | None:
    """The second request of a two-step task (LongBench v2's CoT: the answer prompt with the reasoning in it),
    or None for a one-step task."""
    if "followup" not in spec.variants:
        return None
    from experiments.tasks.formats import followup_prompt

    return GenerationRequest(prompt=followup_prompt(spec, first_answer, example),
                             max_new_tokens=spec.followup_max_new_tokens or spec.max_new_tokens, chat=spec.chat,
                             system=spec.system)
