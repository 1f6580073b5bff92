"""L-Eval's published records: one document (``input``), its ``instructions`` and ``outputs``."""
from __future__ import annotations

from core.text import count_words
from experiments.data.records import Example, document_cluster
from experiments.data.sources import Where


def convert(record: dict, where: Where, task: str | None) -> list[Example]:
    name = task or "leval"
    instructions = where.strings(record, "instructions")
    outputs = where.strings(record, "outputs")
    if len(instructions) != len(outputs):
        raise where.error("outputs", f"{len(outputs)} outputs for {len(instructions)} instructions")
    document = where.text(record, "input")
    evaluation = where.get(record, "evaluation", str, required=False)
    cluster = document_cluster(document)  # L-Eval asks several questions of one document
    examples = []
    for i, (instruction, output) in enumerate(zip(instructions, outputs)):
        examples.append(
            Example(
                id=f"{name}-{where.line}-{i}", task=name, query=instruction, context=document, answers=(output,),
                length=count_words(document), source=where.source, cluster=cluster,
                # the reference's word count feeds L-Eval's length instruction (a prompt matter, see tasks)
                meta={"evaluation": evaluation, "source": record.get("source"), "reference_words": len(output.split())},
            )
        )
    return examples


def detect(record: dict) -> bool:
    return {"instructions", "outputs"} <= set(record)
