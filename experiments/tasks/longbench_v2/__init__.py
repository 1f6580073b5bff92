"""LongBench v2 (THUDM/LongBench, v2 at the repository root): its tasks, records, prompts and metrics.

``pred.py``'s prompts: ``$DOC$`` is the context stripped, ``$Q$`` and ``$C_A..$C_D`` the stripped question and
choices; the fields are filled in one pass, so a document that happens to hold ``$Q$`` stays as it is
(``pred.py``'s chain of ``str.replace`` would rewrite it: the one departure).  The CoT task's second request is
``0shot_cot_ans.txt`` with ``$COT$`` = the first answer stripped.  Chunks a compressor kept of the example
(``pred.py --rag``) are shown as ``Retrieved chunk i: text`` in ``0shot_rag.txt``.
"""
from __future__ import annotations

import functools
import re
from collections import defaultdict

from compressors.base import CompressedContext
from experiments.data.records import Example
from experiments.tasks.benchmark import Benchmark, RecordFormat, ReportTable, folder_prompted_tasks
from experiments.tasks.longbench_v2 import records
from experiments.tasks.prompts import PromptOptions, context_text
from experiments.tasks.specs import TaskSpec

_DOLLAR = re.compile(r"\$(DOC|Q|COT|C_A|C_B|C_C|C_D)\$")


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    return tuple(TaskSpec(
        name=name, family="longbench_v2", category=info["category"], lang="en", metric=info["metric"],
        prompt_version=info.get("prompt_version", 1), max_new_tokens=info["max_new_tokens"], prompt=default,
        variants=variants, followup_max_new_tokens=info.get("followup_max_new_tokens", 0), retrieved_chunks=True,
        source="experiments/tasks/longbench_v2",
    ) for name, info, default, variants in folder_prompted_tasks(__name__))


def _fill(template: str, fields: dict[str, str]) -> str:
    return _DOLLAR.sub(lambda m: fields[m.group(1)] if m.group(1) in fields else m.group(0), template)


def fields(example: Example, context: str = "", cot: str | None = None) -> dict[str, str]:
    out = {"DOC": context.strip(), "Q": example.query.strip()}
    out.update({f"C_{x}": str(example.meta.get(f"choice_{x}", "")).strip() for x in "ABCD"})
    if cot is not None:
        out["COT"] = cot.strip()
    return out


def prompt(spec: TaskSpec, context: CompressedContext | str, example: Example, options: PromptOptions) -> str:
    text, chunks = context_text(spec, context, example)
    template = spec.template("rag") if chunks and "rag" in spec.variants else spec.prompt
    return _fill(template, fields(example, text))


def followup(spec: TaskSpec, first_answer: str, example: Example) -> str:
    """The second CoT request: ``0shot_cot_ans.txt`` with the question, choices and ``$COT$``."""
    return _fill(spec.template("followup"), fields(example, cot=first_answer))


def results_table(cells, predictions) -> tuple[list[str], list[list[str]]]:
    """``result.py``'s Overall / Easy / Hard / Short / Medium / Long per task and arm, from the item scores (so the
    compensated metric's 0.25 for no answer counts as in the script); rows only for this benchmark's records."""
    from experiments.tasks.longbench_v2.metrics import COLUMNS, results_rows

    wanted = {(c.task, c.config_hash): c for c in cells}
    groups: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for r in predictions:
        c = wanted.get((r.task, r.config_hash))
        meta = r.meta or {}
        if c is not None and "difficulty" in meta and "length" in meta and "choice_A" in meta:
            groups[f"{c.task}\x1f{c.reader}\x1f{c.compressor}"].append((float(r.score), meta["difficulty"], meta["length"]))
    rows = results_rows(groups)
    return ["task", "reader", "compressor", *COLUMNS, "n"], [
        [*name.split("\x1f"), *values, str(len(groups[name]))] for name, *values in rows]


BENCHMARK = Benchmark(
    name="longbench_v2",
    formats=(RecordFormat("longbench_v2", records.convert, detect=records.detect),),
    tasks=tasks,
    prompt=prompt,
    followup=followup,
    report_tables={"longbench_v2": ReportTable("LongBench v2 (result.py): accuracy overall, by difficulty and by length",
                                               results_table)},
    metrics=("experiments.tasks.longbench_v2.metrics",),
)
