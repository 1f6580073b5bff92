import pytest

from experiments.run.config import ConfigError, load_config, parse_config
from experiments.run.grid import expand_component, expand_grid
from experiments.run.sections import ComponentConfig

BASE = {
    "tasks": [{"name": "hotpotqa", "path": "data.jsonl"}],
    "readers": ["extractive"],
}


def test_lists_in_params_expand_to_a_product_in_stable_order():
    spec = ComponentConfig(name="retrieval", params={"retriever": ["bm25", "minilm"], "chunk_size": [200, 500], "top_n": 3})
    got = [(c.params["retriever"], c.params["chunk_size"]) for c in expand_component(spec)]
    assert got == [("bm25", 200), ("bm25", 500), ("minilm", 200), ("minilm", 500)]


def test_zip_pairs_longbench_grid_200x7_500x3():
    spec = ComponentConfig(name="retrieval", params={"chunk_size": [200, 500], "top_n": [7, 3]}, zip=["chunk_size", "top_n"])
    got = [(c.params["chunk_size"], c.params["top_n"]) for c in expand_component(spec)]
    assert got == [(200, 7), (500, 3)]


def test_zip_lists_of_unequal_length_are_rejected():
    with pytest.raises(ConfigError, match="equal length"):
        parse_config({**BASE, "compressors": [{"name": "retrieval", "params": {"chunk_size": [200, 500], "top_n": [7]}, "zip": ["chunk_size", "top_n"]}]})


def test_grid_is_readers_times_compressors_and_hashes_are_stable_and_distinct():
    cfg = parse_config({**BASE, "compressors": ["full", {"name": "retrieval", "params": {"top_n": [3, 7]}}], "readers": ["extractive", "smollm2"]})
    grid = expand_grid(cfg)
    assert len(grid) == 2 * 3
    hashes = [p.config_hash for p in grid]
    assert len(set(hashes)) == 6
    again = [p.config_hash for p in expand_grid(parse_config({**BASE, "compressors": ["full", {"name": "retrieval", "params": {"top_n": [3, 7]}}], "readers": ["extractive", "smollm2"]}))]
    assert hashes == again
    # the hash does not depend on the display label
    labelled = parse_config({**BASE, "compressors": [{"name": "full", "label": "whole doc"}]})
    assert expand_grid(labelled)[0].config_hash == expand_grid(parse_config(BASE))[0].config_hash


def test_wrong_type_and_unknown_key_name_the_key():
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "batch_size": "eight"})
    assert "batch_size" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "batchsize": 8})
    assert "batchsize" in str(err.value) and "unknown key" in str(err.value)


def test_a_task_needs_exactly_one_source():
    with pytest.raises(ConfigError, match="exactly one of path, data, hf, synthetic"):
        parse_config({"tasks": [{"name": "hotpotqa"}], "readers": ["extractive"]})


def test_load_config_reports_yaml_line_and_applies_overrides(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  - name: hotpotqa\n    path: [unclosed\nreaders: [x]\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+"):
        load_config(bad)
    good = tmp_path / "good.yaml"
    good.write_text("tasks: [{name: hotpotqa, path: d.jsonl}]\nreaders: [extractive]\n")
    assert load_config(good, {"batch_size": 2}).batch_size == 2
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_set_overrides_reach_list_items_and_short_forms(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("tasks: [{name: hotpotqa, path: d.jsonl}]\ncompressors: [full]\nreaders: [extractive]\n")
    cfg = load_config(path, {"tasks.0.limit": 5, "readers.0.params": {"question_markers": ["Q:"]}})
    assert cfg.tasks[0].limit == 5 and cfg.readers[0].params == {"question_markers": ["Q:"]}
    with pytest.raises(ConfigError, match=r"tasks has no item '3'"):
        load_config(path, {"tasks.3.limit": 5})


def test_open_domain_and_sweeps_do_not_combine_and_distractors_are_typed():
    with pytest.raises(ConfigError, match="a sweep and open_domain do not combine"):
        parse_config({"tasks": [{"name": "nq_multidoc", "path": "x", "sweep": {"positions": [0]},
                                 "open_domain": {"depth": 5}}], "readers": ["extractive"]})
    with pytest.raises(ConfigError, match="method"):
        parse_config({"tasks": [{"name": "nq_multidoc", "path": "x",
                                 "sweep": {"positions": [0], "distractors": {"method": "nearest"}}}], "readers": ["extractive"]})
    cfg = parse_config({"tasks": [{"name": "nq_multidoc", "path": "x", "open_domain": {"retriever": "minilm"}}],
                        "readers": ["extractive"]})
    assert (cfg.tasks[0].open_domain.depth, cfg.tasks[0].open_domain.retriever.name) == (50, "minilm")


def test_a_fleet_is_one_grid_point_and_its_hosts_are_not_part_of_the_key():
    fleet = {"name": "openai", "params": {"model": "m", "base_urls": ["http://a:1/v1", "http://b:1/v1"]}}
    grid = expand_grid(parse_config({**BASE, "readers": [fleet]}))
    assert len(grid) == 1 and grid[0].reader.params["base_urls"] == ["http://a:1/v1", "http://b:1/v1"]
    moved = {"name": "openai", "params": {"model": "m", "base_urls": ["http://c:1/v1"]}}
    assert expand_grid(parse_config({**BASE, "readers": [moved]}))[0].config_hash == grid[0].config_hash
    other_model = {"name": "openai", "params": {"model": "m2", "base_urls": ["http://c:1/v1"]}}
    assert expand_grid(parse_config({**BASE, "readers": [other_model]}))[0].config_hash != grid[0].config_hash
    models = {"name": "openai", "params": {"model": ["m1", "m2"], "base_url": "http://a:1/v1"}}
    assert len(expand_grid(parse_config({**BASE, "readers": [models]}))) == 2  # other lists still expand
