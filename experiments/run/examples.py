"""The examples of one task of a run config: from a file, the hub or a generator, then swept or retrieved for."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.errors import UserError
from core.registry import ComponentSpec
from experiments.data.records import Example
from experiments.data.sampling import draw_sample
from experiments.run.config import RunConfig, TaskConfig
from experiments.run.sections import generator_params
from experiments.run.sharding import ShardPlan
from experiments.tasks.benchmark import benchmark_of, generator_of, record_format
from experiments.tasks.loading import load_examples, load_hf
from experiments.tasks.specs import TaskSpec, get_task


def task_spec(task: TaskConfig) -> TaskSpec:
    """The task's spec with the config's opt-in prompt fixes and its own ``metric`` applied."""
    spec = get_task(task.name)
    if task.metric is not None:
        spec = replace(spec, metric=task.metric)
    return spec.with_fixes() if task.prompt_fixes else spec


def load_task_examples(task: TaskConfig, *, progress: bool = False, shards: ShardPlan | None = None) -> list[Example]:
    """Examples of one task, from a file, the Hugging Face hub or the project's own generator, swept if asked.

    ``limit`` keeps the first N questions; ``sample`` a seeded, nested sample of the whole pool
    (``experiments.data.sampling``), taken before a sweep moves each question through its positions; an
    open-domain corpus is always the whole file.  ``shards``: how a dense open-domain corpus is indexed
    (through embedding shards; None: as always).
    """
    spec = task_spec(task)
    if task.file is not None:
        examples = load_examples(task.file, spec.family, _task_name(spec, task), limit=task.limit)
    elif task.hf is not None:
        examples = load_hf(task.hf, name=task.hf_name, split=task.split, family=spec.family,
                           task=_task_name(spec, task))[: task.limit]
    elif task.generate is not None:
        examples = _generated(spec, task)
    else:
        examples = _synthetic_examples(task)[: task.limit]
    if task.sample is not None:
        examples = draw_sample(examples, task.sample.n, seed=task.sample.seed, by=task.sample.by,
                               deal=task.sample.deal)
    if task.sweep is not None:
        examples = _sweep(spec, examples, task)
    if task.open_domain is not None:
        examples = _open_domain(spec, examples, task, progress, shards)
    if task.chunks is not None:
        examples = _chunked(examples, task)
    return examples


def pools(config: RunConfig, *, documents: bool = False) -> dict[str, tuple[int, int]]:
    """Per task of ``config``: the questions its file (or generator) holds (``documents``: the documents), and
    the most one of its documents holds (what bounds a document's sum in the betting test)."""
    from collections import Counter

    out = {}
    for task in config.tasks:
        bare = task.model_copy(update={"sample": None, "sweep": None, "open_domain": None, "chunks": None})
        per_document = Counter(e.cluster or e.id for e in load_task_examples(bare))
        out[task.key] = (len(per_document) if documents else sum(per_document.values()),
                         max(per_document.values(), default=1))
    return out


def source_pools(config: RunConfig) -> dict[str, tuple[int | None, int]]:
    """Per task of ``config``: the documents its source holds (the whole file, whatever a pilot's ``limit``
    kept: a pilot of 6 questions from a 2,655-question file must size a study of the file; None for a
    generated task, whose ``n`` makes more) and the most questions one document of that source holds (the
    bound a document's sum takes in the betting test, fixed before any score).  Empty when the data cannot
    be read here."""
    try:
        generated = {t.key for t in config.tasks if t.generated}
        whole = config.model_copy(update={"tasks": [t if t.key in generated else t.model_copy(update={"limit": None})
                                                    for t in config.tasks]})
        return {task: (None if task in generated else documents, largest * _items_per_question(config, task))
                for task, (documents, largest) in pools(whole, documents=True).items()}
    except Exception:  # noqa: BLE001 - the data moved or is not fetched: the caller says the pool is unknown
        return {}


def dealt_pools(config: RunConfig) -> dict[str, tuple[int | None, int]]:
    """``source_pools`` with each bound cut to what the run's own sample can deal a document: a round-robin
    sample by document (``sample: {n, by: document}``) deals at most ``dealt_bound`` questions to one document
    (one each while n does not exceed the documents), which the config and the pool's questions per document
    fix before any score.  What the report's betting test bounds a document's sum by (``grid.json``); ``plan``
    keeps the pool's largest document, since the study it sizes may deal more."""
    from collections import Counter

    from experiments.data.sampling import dealt_bound

    out = source_pools(config)
    for task in config.tasks:
        sample = task.sample
        if task.key not in out or sample is None or sample.by != "document" or sample.deal != "round-robin":
            continue
        bare = task.model_copy(update={"sample": None, "sweep": None, "open_domain": None, "chunks": None})
        sizes = Counter(e.cluster for e in load_task_examples(bare)).values()  # as draw_sample groups them
        documents, bound = out[task.key]
        out[task.key] = (documents, min(bound, dealt_bound(sizes, sample.n) * _items_per_question(config, task.key)))
    return out


def _items_per_question(config: RunConfig, key: str) -> int:
    """How many scored items a task makes of one source question: a sweep moves it through its positions (and
    adds its closed-book or oracle item), every question alike, so the pool's largest document holds this many
    times its questions.  Read off the task's first question, expanded as a run expands it (an open-domain
    task retrieves one list a question, so it is left out: no corpus is indexed to size a bound)."""
    from collections import Counter

    task = next(t for t in config.tasks if t.key == key)
    if task.sweep is None:
        return 1
    first = task.model_copy(update={"sample": None, "limit": 1, "open_domain": None})
    return max(Counter(e.cluster or e.id for e in load_task_examples(first)).values(), default=1)


def run_pools(run_dir: str | Path) -> dict[str, tuple[int | None, int]]:
    """``source_pools`` of a run directory's config (empty when it has none)."""
    import yaml

    from experiments.data.store import CONFIG
    from experiments.run.config import parse_config

    path = Path(run_dir) / CONFIG
    if not path.is_file():
        return {}
    return source_pools(parse_config(yaml.safe_load(path.read_text(encoding="utf-8")) or {}))


def _generated(spec: TaskSpec, task: TaskConfig) -> list[Example]:
    """Examples the task's benchmark makes from the config task's ``generate:`` section."""
    assert task.generate is not None
    return generator_of(task.name).make(spec, generator_params(task.name, task.generate), task.limit,
                                        f"generated:{task.key}")


def generator_reads(task: TaskConfig) -> tuple[str | None, ...]:
    """The files (data names or paths) a task's ``generate:`` section makes its benchmark's generator read."""
    if task.generate is None:
        return ()
    return tuple(generator_of(task.name).reads(generator_params(task.name, task.generate)))


def _chunked(examples: list[Example], task: TaskConfig) -> list[Example]:
    """Each example with its context cut into untitled passages (ids ``{example id}#c{i}``); the context stays."""
    from dataclasses import replace

    from indexes.chunking import make_chunker
    from indexes.types import Passage

    chunks = task.chunks
    assert chunks is not None
    chunker = make_chunker(chunks.chunker.spec, chunks.size)
    out = []
    for ex in examples:
        pieces = chunker.split(ex.context, doc_id=ex.id)
        passages = tuple(Passage(text=c.text.strip(), doc_id=f"{ex.id}#c{i}") for i, c in enumerate(pieces) if c.text.strip())
        out.append(replace(ex, passages=passages, meta={**ex.meta, "n_chunks": len(passages)}))
    return out


def _task_name(spec: TaskSpec, task: TaskConfig) -> str | None:
    return benchmark_of(spec.family).record_task(spec, task.name)


def _synthetic_examples(task: TaskConfig) -> list[Example]:
    src = task.synthetic
    assert src is not None  # guaranteed by TaskConfig validation
    if src.kind == "multidoc_qa":
        from experiments.data.synthetic import make_multidoc_qa

        return make_multidoc_qa(src.n, num_docs=src.num_docs, words_per_doc=src.words_per_doc, seed=src.seed)
    from experiments.protocols.kv import generate_kv_examples

    return generate_kv_examples(src.n, src.num_keys, seed=src.seed)


def _sweep(spec: TaskSpec, examples: list[Example], task: TaskConfig) -> list[Example]:
    """The benchmark's own sweep, else the gold document through positions (``protocols.litm.gold_sweep``)."""
    sweep = benchmark_of(spec.family).sweep
    if sweep is not None:
        return sweep(spec, examples, task)
    from experiments.protocols.litm import gold_sweep

    return gold_sweep(examples, task)


def _open_domain(spec: TaskSpec, examples: list[Example], task: TaskConfig, progress: bool,
                 shards: ShardPlan | None) -> list[Example]:
    from experiments.protocols.corpus import load_litm_corpus
    from experiments.protocols.large_corpus import CorpusPassageIndex, is_corpus_file, open_corpus_search
    from experiments.protocols.open_domain import open_domain_examples

    od = task.open_domain
    assert od is not None
    corpus_file = od.corpus or task.file
    if corpus_file is None:
        raise UserError(f"task {task.key!r}: open_domain needs a corpus file (`corpus:`, or the task's `path:` "
                        "or `data:`)")
    if not record_format(spec.family).open_domain:
        raise UserError(f"task {task.key!r}: open_domain works on tasks whose records hold a question and gold-marked "
                        f"passages (Lost in the Middle QA), not {spec.family}")
    if od.corpus and is_corpus_file(od.corpus):  # a passage corpus by name or path, searched from disk
        search = open_corpus_search(od.corpus, od.retriever.spec, progress=progress,
                                    pool_for=shards.encoder_pool if shards is not None else None)
        return open_domain_examples(examples, [], retriever=od.retriever.spec, depth=od.depth, progress=progress,
                                    index=CorpusPassageIndex(search))
    _, corpus = load_litm_corpus(corpus_file)
    dense = shards is not None and is_dense(od.retriever.spec)
    return open_domain_examples(examples, corpus, retriever=od.retriever.spec, depth=od.depth, progress=progress,
                                index_with=shards.index if dense else None)


def is_dense(section: ComponentSpec) -> bool:
    """Whether a retriever section names a dense retriever (which alone can search shards); nothing is built."""
    from retrievers.dense import DenseRetriever
    from retrievers.registry import RETRIEVERS

    target = RETRIEVERS.get(section.name)
    return isinstance(target, type) and issubclass(target, DenseRetriever)
