"""Every shipped config parses, and every component it names resolves in its registry."""
from pathlib import Path

import pytest

from compressors.registry import COMPRESSORS
from experiments.run.config import expand_grid, load_config
from experiments.tasks import get_task
from readers.registry import get_reader_class
from retrievers.registry import RETRIEVERS

CONFIGS = sorted(p for p in (Path(__file__).resolve().parents[2] / "experiments" / "configs").glob("*.yaml") if p.stem != "litm_open_domain")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_config_is_valid(path):
    from experiments.run.runner import check_components

    cfg = load_config(path)
    check_components(cfg)  # tasks, components and every parameter they are given
    for task in cfg.tasks:
        get_task(task.name)
    for point in expand_grid(cfg):
        COMPRESSORS.get(point.compressor.name)
        get_reader_class(point.reader.name)
        retr = point.compressor.params.get("retriever")
        if retr is not None:
            RETRIEVERS.get(retr["name"] if isinstance(retr, dict) else retr)


def test_longbench_table4_grid_is_full_plus_3_retrievers_x_2_sizes_per_reader():
    cfg = load_config(Path(__file__).resolve().parents[2] / "experiments" / "configs" / "longbench_table4.yaml")
    labels = sorted({p.compressor_label for p in expand_grid(cfg)})
    assert len(labels) == 7 and "full" in labels
    assert sum("200x7" in l for l in labels) == 3 and sum("500x3" in l for l in labels) == 3


def test_open_domain_curve_config_is_valid():
    from experiments.run.config import load_curve_config

    cfg = load_curve_config(Path(__file__).resolve().parents[2] / "experiments" / "configs" / "litm_open_domain.yaml")
    assert cfg.ks == [1, 2, 5, 10, 20, 30, 40, 50]
    RETRIEVERS.get(cfg.retriever.name)
    for reader in cfg.readers:
        get_reader_class(reader.name)


def test_the_readme_config_example_is_valid():
    import re

    import yaml

    from experiments.run.config import parse_config
    from experiments.run.runner import check_components

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"## A config\n\n```yaml\n(.*?)```", readme, flags=re.S)
    cfg = parse_config(yaml.safe_load(block), "README.md")
    check_components(cfg)
    assert len(expand_grid(cfg)) == 2 * (1 + 2 * 2)
