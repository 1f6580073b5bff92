"""Every shipped config parses, and every component it names resolves in its registry."""
from pathlib import Path

import pytest

from compressors.registry import COMPRESSORS
from experiments.run.config import load_config
from experiments.run.grid import expand_grid
from experiments.tasks import get_task
from readers.registry import READERS
from retrievers.registry import RETRIEVERS

REPO = Path(__file__).resolve().parents[3]
CONFIGS = sorted((REPO / "experiments" / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_is_valid(path):
    from experiments.run.grid import expand_grid
    from experiments.run.plan import check_components

    cfg = load_config(path)
    check_components(cfg, expand_grid(cfg))  # tasks, components and every parameter they are given
    for task in cfg.tasks:
        get_task(task.name)
    for point in expand_grid(cfg):
        COMPRESSORS.get(point.compressor.name)
        READERS.get(point.reader.name)
        retr = point.compressor.params.get("retriever")
        if retr is not None:
            RETRIEVERS.get(retr["name"] if isinstance(retr, dict) else retr)


def test_longbench_table4_grid_is_full_plus_3_retrievers_x_2_sizes_per_reader():
    cfg = load_config(REPO / "experiments" / "configs" / "longbench_table4.yaml")
    points = expand_grid(cfg)
    per_reader = [p for p in points if p.reader == points[0].reader]
    sizes = sorted((p.compressor.params.get("chunk_size"), p.compressor.params.get("top_n")) for p in per_reader
                   if p.compressor.name == "retrieval")
    assert len(per_reader) == 7 and sum(p.compressor.name == "full" for p in per_reader) == 1
    assert sizes == [(200, 7)] * 3 + [(500, 3)] * 3


def test_open_domain_config_is_a_run_config_over_k():
    cfg = load_config(REPO / "experiments" / "configs" / "litm_open_domain.yaml")
    assert [p.compressor.params["k"] for p in expand_grid(cfg)] == [1, 2, 5, 10, 20, 30, 40, 50]
    assert cfg.tasks[0].open_domain.depth == 50


def test_the_readme_config_example_is_valid():
    import re

    import yaml

    from experiments.run.config import parse_config
    from experiments.run.grid import expand_grid
    from experiments.run.plan import check_components

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"## A config\n\n```yaml\n(.*?)```", readme, flags=re.S)
    cfg = parse_config(yaml.safe_load(block), "README.md")
    check_components(cfg, expand_grid(cfg))
    assert len(expand_grid(cfg)) == 2 * (1 + 2 * 2)
