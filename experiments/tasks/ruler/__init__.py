"""RULER (NVIDIA/RULER): its synthetic tasks (``tasks.yaml``: ``constants.py``'s templates), records,
metrics and generator (``generate.py``; a config task's ``generate:`` section, validated by
:class:`GenerateParams`, or ``ctxcomp build ruler``, ``commands.py``).

The prompt is the template filled with the record's ``query``, ``type_needle_v`` and ``num_v``, the answer
prefix after it; one query with one value uses RULER's singular wording (its four replacements, ``niah.py``).
"""
from __future__ import annotations

import functools
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compressors.base import CompressedContext
from core.errors import UserError
from core.files import load_yaml
from experiments.data.records import Example
from experiments.tasks.benchmark import Benchmark, Generator, RecordFormat, folder_text
from experiments.tasks.prompts import PromptOptions, fill_template, text_of
from experiments.tasks.ruler import records
from experiments.tasks.specs import TaskSpec

_SINGULAR = (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer"))


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    data = load_yaml(folder_text(__name__, "tasks.yaml"))
    return tuple(TaskSpec(
        name=name, family="ruler", category=info["category"], lang="en", metric=info["metric"], prompt_version=info.get("prompt_version", 1),
        max_new_tokens=data["tokens_to_generate"][info["kind"]],
        prompt=data["templates"][info["kind"]] + data["answer_prefixes"][info["kind"]],
        source=f"experiments/tasks/ruler ({info['kind']})",
    ) for name, info in data["tasks"].items())


def prompt(spec: TaskSpec, context: CompressedContext | str, example: Example, options: PromptOptions) -> str:
    template = spec.prompt
    if example.meta.get("singular"):
        for old, new in _SINGULAR:
            template = template.replace(old, new)
    return fill_template(template, context=text_of(context), query=str(example.meta.get("query", "")),
                         type_needle_v=str(example.meta.get("type_needle_v", "")),
                         num_v=str(example.meta.get("num_v", "")))


class GenerateParams(BaseModel):
    """A config task's ``generate:`` section: RULER-style examples generated in place, ``n`` per length.

    ``lengths`` are targets in ``tokenizer``'s tokens (``words``; ``tiktoken:NAME``; a Hugging Face id or
    folder; ``reader:NAME``: the tokenizer of that reader, e.g. ``reader:smollm2``).  ``haystack``: ``essay``
    (the project's own prose, or the text file ``essay``), ``noise``.  ``qa_source``: the QA file (a data name
    or path) whose passages the ``qa`` task pads with.
    """

    model_config = ConfigDict(extra="forbid")

    lengths: list[Annotated[int, Field(ge=256)]]
    n: int = Field(10, gt=0)
    seed: int = 0
    tokenizer: str = "words"
    haystack: Literal["essay", "noise"] = "essay"
    essay: str | None = None
    qa_source: str | None = None


def generate_examples(spec: TaskSpec, params: GenerateParams, limit: int | None, source: str) -> list[Example]:
    """RULER-style records generated from a config task's ``generate:`` section (``limit`` keeps the first N per
    length)."""
    from experiments.data.catalog import catalog, local_file
    from experiments.tasks.loading import examples_from_records, load_examples
    from experiments.tasks.ruler.generate import generate, token_counter

    qa: list[Example] = []
    if params.qa_source is not None:
        qa = load_examples(str(local_file(params.qa_source)) if params.qa_source in catalog() else params.qa_source)
    essay = _read_text(params.essay) if params.essay is not None else None
    n = min(params.n, limit) if limit else params.n
    made = generate(spec.name.removeprefix("ruler_"), params.lengths, n, count=token_counter(params.tokenizer),
                    seed=params.seed, haystack=params.haystack, essay_text=essay, qa_examples=qa)
    return examples_from_records(made, "ruler", spec.name, source)


def _read_text(path: str) -> str:
    try:
        return open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read the haystack text {path}: {err}") from None


BENCHMARK = Benchmark(
    name="ruler",
    formats=(RecordFormat("ruler", records.convert, detect=records.detect),),
    tasks=tasks,
    prompt=prompt,
    generator=Generator(GenerateParams, generate_examples, reads=lambda params: (params.qa_source, params.essay)),
    metrics=("experiments.tasks.ruler.metrics",),
    commands={"ruler": "experiments.tasks.ruler.commands:build_ruler"},
)
