"""RULER (NVIDIA/RULER): its synthetic tasks (``tasks.yaml``: ``constants.py``'s templates), records,
metrics and generator (``generate.py``; a config's ``ruler:`` section, or ``ctxcomp build ruler``).

The prompt is the template filled with the record's ``query``, ``type_needle_v`` and ``num_v``, the answer
prefix after it; one query with one value uses RULER's singular wording (its four replacements, ``niah.py``).
"""
from __future__ import annotations

import functools

from compressors.base import CompressedContext
from core.errors import UserError
from core.files import load_yaml
from experiments.data.records import Example
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_text
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


def generate_examples(spec: TaskSpec, task) -> list[Example]:
    """RULER-style records generated from a config's ``ruler:`` section (``limit`` keeps the first N per length)."""
    from experiments.data.catalog import catalog, local_file
    from experiments.tasks.loading import examples_from_records, load_examples
    from experiments.tasks.ruler.generate import generate, token_counter

    src = task.ruler
    qa: list[Example] = []
    if src.qa_source is not None:
        qa = load_examples(str(local_file(src.qa_source)) if src.qa_source in catalog() else src.qa_source)
    essay = _read_text(src.essay) if src.essay is not None else None
    n = min(src.n, task.limit) if task.limit else src.n
    made = generate(spec.name.removeprefix("ruler_"), src.lengths, n, count=token_counter(src.tokenizer),
                    seed=src.seed, haystack=src.haystack, essay_text=essay, qa_examples=qa)
    return examples_from_records(made, "ruler", spec.name, f"generated:{task.key}")


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
    generate=generate_examples,
    metrics=("experiments.tasks.ruler.metrics",),
)
