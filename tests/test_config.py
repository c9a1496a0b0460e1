import copy
import json
import re

import pytest
import yaml

from augsbert.store.keys import canonical_json
from augsbert.config.load import ConfigError, deep_merge, load_config, prepare_config, read_config
from augsbert.config.schema import coerce, load_schema
from augsbert.plan import Plan
from augsbert.reporting.layout import grid_spec
from conftest import REPO


@pytest.fixture
def raw_config():
    """The shipped config with one of its grids (`demo`): validating the ~200 experiments of all the paper
    grids costs seconds per test and checks nothing more here (tests/test_plan.py plans them all once)."""
    raw = read_config(REPO / "config" / "config.yaml")
    raw["grids"] = {"demo": raw["grids"]["demo"]}
    return raw


def test_defaults_filled_and_experiments_merged(raw_config):
    cfg = prepare_config(raw_config)
    exp = cfg["experiments"]["demo_zeroshot"]
    assert exp["base_model"] == "minilm-l6"
    assert {k: exp["suite"][k] for k in ("batch_size", "max_length", "suites")} == {
        "batch_size": 64, "max_length": 256, "suites": ["sts", "topic", "useb", "diagnostics"]}
    assert cfg["datasets"]["lee"]["split_fractions"] == [0.5, 0.2, 0.3]
    assert cfg["datasets"]["lee"]["on_bad_rows"] == "error"
    # loader-specific defaults only where they belong
    assert "split_fractions" not in cfg["datasets"]["stsb"]
    assert cfg["datasets"]["bws_cross_topic"]["dev_topics"] == ["Death penalty"]


def test_user_defaults_are_not_shadowed_by_schema_defaults(raw_config):
    raw_config["defaults"]["suite"] = {"batch_size": 8}
    raw_config["experiments"]["stsb_zeroshot"]["suite"] = {"batch_size": 4}
    cfg = prepare_config(raw_config)
    assert cfg["experiments"]["demo_zeroshot"]["suite"]["batch_size"] == 8
    assert cfg["experiments"]["demo_zeroshot"]["suite"]["max_length"] == 256
    assert cfg["experiments"]["stsb_zeroshot"]["suite"]["batch_size"] == 4


def test_command_line_strings_are_coerced_to_schema_types(raw_config):
    # what `snakemake --config 'experiments={demo_zeroshot: {suite: {batch_size: 32}}}'` produces
    as_strings = deep_merge(raw_config, {"experiments": {"demo_zeroshot": {"suite": {"batch_size": "32"}}},
                                         "seeds": "[42, 43]",
                                         "datasets": {"lee": {"split_fractions": ["0.5", "0.25", "0.25"]}}})
    typed = deep_merge(raw_config, {"experiments": {"demo_zeroshot": {"suite": {"batch_size": 32}}},
                                    "seeds": [42, 43],
                                    "datasets": {"lee": {"split_fractions": [0.5, 0.25, 0.25]}}})
    a, b = prepare_config(as_strings), prepare_config(typed)
    assert a == b
    assert a["experiments"]["demo_zeroshot"]["suite"]["batch_size"] == 32
    assert Plan(a).experiment_spec("demo_zeroshot") == Plan(b).experiment_spec("demo_zeroshot")


def test_coerce_scalars():
    schema = load_schema()
    out = coerce({"device": "cpu", "seeds": ["1", "2"],
                  "datasets": {"x": {"loader": "pairs_file", "train": "a.csv", "test": "b.csv",
                                     "score_range": ["0", "5.0"], "header": "false", "dev": "null"}}}, schema)
    assert out["seeds"] == [1, 2]
    ds = out["datasets"]["x"]
    assert ds["score_range"] == [0, 5.0] and ds["header"] is False and ds["dev"] is None
    assert ds["train"] == "a.csv"  # strings stay strings


def test_yaml_exponent_without_dot_is_a_number():
    # PyYAML reads `2e-1` as a string; the schema says number, so it is converted.
    schema = load_schema()
    out = coerce({"datasets": {"x": {"loader": "pairs_file", "score_range": ["2e-1", "1e0"]}}}, schema)
    assert out["datasets"]["x"]["score_range"] == [0.2, 1.0]


def test_unknown_key_is_named(raw_config):
    raw_config["experiments"]["demo_zeroshot"]["suiet"] = {"batch_size": 3}
    with pytest.raises(ConfigError, match=r"experiments\.demo_zeroshot.*suiet"):
        prepare_config(raw_config)


def test_misspelt_key_is_its_path_and_a_suggestion_in_two_lines(raw_config):
    raw_config["experiments"]["demo_zeroshot"]["studnet"] = {"epochs": 1}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value) == "unknown key experiments.demo_zeroshot.studnet\n  did you mean 'student'?"


def test_nested_misspelt_key_does_not_make_its_siblings_unknown(raw_config):
    # jsonschema also calls every sibling of a failing nested key "unevaluated"; only the real one is named
    raw_config["experiments"]["demo_zeroshot"]["student"] = {"epocs": 1}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value) == "unknown key experiments.demo_zeroshot.student.epocs\n  did you mean 'epochs'?"


def test_misspelt_key_is_reported_once_where_it_was_written(raw_config):
    raw_config["defaults"]["suiet"] = {}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value) == "unknown key defaults.suiet\n  did you mean 'suite'?"
    del raw_config["defaults"]["suiet"]
    raw_config["grids"]["demo"]["axes"]["sampling"]["bm25"]["candidates"]["strategys"] = ["bm25"]
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value) == (
        "unknown key grids.demo.axes.sampling.bm25.candidates.strategys\n  did you mean 'strategies'?"
    )


def test_unknown_key_without_a_close_match_lists_the_keys_allowed_there(raw_config):
    raw_config["xyzzy"] = 1
    raw_config["experiments"]["demo_zeroshot"]["teacher"] = {"lr": "fast"}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value) == (
        "invalid configuration:\n"
        "  experiments.demo_zeroshot.teacher.lr: 'fast' is not of type 'number'\n"
        "  unknown key xyzzy\n"
        "    allowed here: cuda_graphs, data_dir, datasets, defaults, device, experiments, gpus, grids, hub_revisions, "
        "precision, rehearse, seeds, "
        "tracking, tracking_dir")


def test_unknown_dataset_key_is_named(raw_config):
    raw_config["datasets"]["lee"]["split_fraction"] = [1, 1, 1]
    with pytest.raises(ConfigError, match=r"datasets\.lee.*split_fraction"):
        prepare_config(raw_config)


def test_wrong_type_is_named(raw_config):
    raw_config["defaults"]["suite"] = {"batch_size": "many"}
    with pytest.raises(ConfigError, match=r"batch_size"):
        prepare_config(raw_config)


def test_unknown_dataset_reference(raw_config):
    raw_config["experiments"]["demo_zeroshot"]["dataset"] = "nope"
    with pytest.raises(ConfigError, match="unknown dataset 'nope'"):
        prepare_config(raw_config)


def test_missing_required_dataset(raw_config):
    del raw_config["experiments"]["demo_zeroshot"]["dataset"]
    with pytest.raises(ConfigError, match="dataset"):
        prepare_config(raw_config)


def test_pairs_file_requires_train_and_test(raw_config):
    raw_config["datasets"]["mine"] = {"loader": "pairs_file", "train": "a.csv"}
    with pytest.raises(ConfigError, match="test"):
        prepare_config(raw_config)


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("seeds: [1,\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:2:1: not valid YAML: did not find expected node content \(while "
                                          r"parsing a flow node at line 2, column 1\)"):
        load_config(bad)


def test_canonical_json_treats_integral_floats_as_ints():
    assert canonical_json({"b": 4.0, "a": [1.0, 0.5]}) == canonical_json({"a": [1, 0.5], "b": 4})
    assert canonical_json({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_every_schema_key_has_description_and_default():
    schema = load_schema()
    missing = []

    def walk(node, path):
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                required = name in node.get("required", [])
                if "$ref" not in sub and ("description" not in sub or ("default" not in sub) != required):
                    missing.append(f"{path}.{name}")
                walk(sub, f"{path}.{name}")
            for key in ("allOf", "$defs"):
                for i, sub in (node.get(key, {}).items() if isinstance(node.get(key), dict)
                               else enumerate(node.get(key, []))):
                    walk(sub, f"{path}.{key}[{i}]")
            if "then" in node:
                walk({**node["then"], "required": node["then"].get("required", [])}, path)
            if isinstance(node.get("additionalProperties"), dict):
                walk(node["additionalProperties"], path + ".*")

    walk(schema, "")
    assert missing == []


def test_grid_files_are_read_beside_the_config_and_merge_under_its_grids(tmp_path):
    from augsbert.config.grids import with_grid_files

    shipped = read_config(REPO / "config" / "config.yaml")
    assert "grids" not in yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert set(shipped["grids"]) == {p.stem for p in (REPO / "config" / "grids").glob("*.yaml")}
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "mine.yaml").write_text("description: x\nseeds: [1, 2]\ncolumns: {lee: {dataset: lee}}\n")
    (tmp_path / "config.yaml").write_text("seeds: [42]\ngrids: {mine: {seeds: [3]}, other: {description: y}}\n")
    assert read_config(tmp_path / "config.yaml")["grids"] == {
        "mine": {"description": "x", "seeds": [3], "columns": {"lee": {"dataset": "lee"}}},
        "other": {"description": "y"}}
    assert with_grid_files({"seeds": [1]}, [tmp_path / "nowhere"]) == {"seeds": [1]}
    (tmp_path / "grids" / "bad.yaml").write_text("- a list\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: a grid file holds one grid"):
        read_config(tmp_path / "config.yaml")


@pytest.mark.parametrize("override, where", [
    ({"defaults": {"teacher": {"lr": float("nan")}}}, "defaults.teacher.lr: nan"),
    ({"defaults": {"teacher": {"warmup_ratio": float("nan")}}}, "defaults.teacher.warmup_ratio: nan"),
    ({"experiments": {"demo_cbe": {"student": {"lr": float("inf")}}}}, "experiments.demo_cbe.student.lr: inf"),
    ({"datasets": {"mine": {"loader": "pairs_file", "path": "x.tsv", "score_range": [0, float("inf")]}}},
     "datasets.mine.score_range[1]: inf"),
    ({"datasets": {"mine": {"loader": "pairs_file", "path": "x.tsv",
                            "score_range": [float("-inf"), float("inf")]}}}, "datasets.mine.score_range[0]: -inf"),
])
def test_non_finite_numbers_are_refused_where_they_are_written(raw_config, override, where):
    """Issue 26 case 2: NaN passes every schema bound (comparisons with NaN are false) and an infinite score
    range rescales every score to 0 or NaN; both were planned into jobs. Seen failing before: no error."""
    with pytest.raises(ConfigError, match="^" + re.escape(where) + " is not a finite number"):
        prepare_config(deep_merge(raw_config, override))


def test_a_nan_given_on_the_command_line_is_refused_too(raw_config):
    """Snakemake reads `--config` values as YAML (`.nan` is a float NaN); as a string it is not a number."""
    for value, message in ((float("nan"), "nan is not a finite number"), (".nan", "'.nan' is not of type 'number'")):
        with pytest.raises(ConfigError, match=re.escape(f"defaults.student.lr: {message}")):
            prepare_config(deep_merge(raw_config, {"defaults": {"student": {"lr": value}}}))


@pytest.mark.parametrize("override, message", [
    ({"defaults": [1, 2]}, "defaults: a mapping of stage sections, not list"),
    ({"experiments": ["x"]}, "experiments: a mapping of name -> experiment, not list"),
    ({"experiments": {"x": 3}}, "experiments.x: each experiment is a mapping of options, not int"),
    ({"grids": {"g": "text"}}, "grids.g: each grid is a mapping of options, not str"),
])
def test_shapes_are_checked_before_merging(raw_config, override, message):
    """Issue 26 case 5: these crashed deep_merge / expand_grids with a traceback. Seen failing before."""
    raw = {**raw_config, **override}
    with pytest.raises(ConfigError, match=re.escape(message)):
        prepare_config(raw)


def test_a_yaml_bomb_is_refused_without_walking_or_printing_it(raw_config, tmp_path):
    """Issue 26 case 6: a 326-byte "billion laughs" under `description:` gave a 52 MB error message."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "config.yaml"
    bomb.write_text("\n".join(lines) + "\nexperiments:\n  demo_cbe:\n    description: *a8\n")
    assert bomb.stat().st_size < 600
    from augsbert.config.load import load_config

    with pytest.raises(ConfigError, match="expands to more than 1,000,000 values") as err:
        load_config(bomb)
    assert len(str(err.value)) < 300
    # a long wrong value is named, not echoed whole
    raw = deep_merge(raw_config, {"experiments": {"demo_cbe": {"description": ["x" * 50] * 100}}})
    with pytest.raises(ConfigError) as err:
        prepare_config(raw)
    assert "experiments.demo_cbe.description" in str(err.value) and len(str(err.value)) < 400


def test_the_workflow_schemas_are_the_package_ones():
    """workflow/schemas/ (the catalog layout) and the package hold one file of each schema, the other a link."""
    for name in ("config.schema.yaml", "results.schema.yaml"):
        workflow, package = REPO / "workflow" / "schemas" / name, REPO / "src" / "augsbert" / "schemas" / name
        assert workflow.is_symlink() or package.is_symlink(), f"one of the two {name} is a link to the other"
        assert workflow.resolve() == package.resolve()


@pytest.mark.parametrize("override, message", [
    ({"seeds": [-1]}, "seeds.0: -1 is less than the minimum of 0"),
    ({"seeds": [2 ** 32]}, "seeds.0: 4294967296 is greater than the maximum of 4294967295"),
    ({"seeds": [42, 42]}, "has non-unique elements"),
    ({"datasets": {"lee": {"loader": "lee", "split_seed": -1}}}, "datasets.lee.split_seed: -1 is less than"),
    ({"experiments": {"x" * 151: {"dataset": "lee"}}}, "a name of 151 characters; at most 150"),
])
def test_seeds_and_names_have_bounds_a_job_can_use(raw_config, override, message):
    """Issue 26 cases 5 and 7: negative seeds, seeds >= 2^32 and 300-character names passed validation and failed
    inside a job (numpy seeds are 32-bit; a file name has 255 bytes); a repeated seed counted as two runs."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        prepare_config({**raw_config, **{k: v for k, v in override.items() if k != "datasets"},
                        **({"datasets": deep_merge(raw_config["datasets"], override["datasets"])}
                           if "datasets" in override else {})})


def test_a_key_written_twice_is_refused_naming_file_line_and_key(tmp_path):
    """Issue 26 case 7: a duplicate YAML key silently kept the last value (`lr: 1e-5` ... `lr: 3e-5`). Seen failing
    before: both files read without an error, with the last value."""
    config = tmp_path / "config.yaml"
    config.write_text("seeds: [42]\nexperiments:\n  x:\n    student:\n      lr: 1.0e-5\n      epochs: 2\n"
                      "      lr: 3.0e-5\n")
    with pytest.raises(ConfigError) as err:
        read_config(config)
    assert str(err.value) == (f"{config}:7: duplicate key experiments.x.student.lr (first written at line 5); YAML "
                              "would silently keep only the last one: remove or merge one of them")
    # in a grid file beside it, in a list, and at the top level; quoting a key does not make it another one
    config.write_text("seeds: [42]\n")
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "g.yaml").write_text("columns:\n  lee: {dataset: lee}\naxes:\n  m: [{a: 1, 'a': 2}]\n")
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'grids' / 'g.yaml'}:4: duplicate key axes.m[0].a "
                                                    "(first written at line 4)")):
        read_config(config)
    (tmp_path / "grids" / "g.yaml").unlink()
    config.write_text("seeds: [42]\ndata_dir: a\nseeds: [1]\n")
    with pytest.raises(ConfigError, match=re.escape(f"{config}:3: duplicate key seeds (first written at line 1)")):
        load_config(config)
    # a merge key (`<<: *anchor`) is not a duplicate: explicit keys override merged ones by design
    config.write_text("base: &b {lr: 1, epochs: 2}\nover:\n  <<: *b\n  lr: 3\n")
    assert read_config(config)["over"] == {"lr": 3, "epochs": 2}


# --- issue 42: messages that point the way -------------------------------------------------------------------

def test_a_mistyped_loader_is_one_line_with_did_you_mean_not_buried_in_follow_on_errors(raw_config):
    raw_config["datasets"]["mine"] = {"loader": "pair_file", "train": "a.csv", "test": "b.csv", "score_range": [0, 5]}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value) == (
        "datasets.mine.loader: 'pair_file' is not a choice; did you mean 'pairs_file'? choose from lee, stsb, "
        "bws_cross_topic, bws_in_topic, spanish_sts, pairs_file, text_file, beir, parallel_rows, parallel_file")


def test_a_mistyped_choice_comes_first_with_did_you_mean(raw_config):
    raw_config["datasets"]["lee"]["on_bad_rows"] = "skipp"
    raw_config["xyzzy"] = 1
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config)
    assert str(err.value).split("\n")[:2] == [
        "invalid configuration:",
        "  datasets.lee.on_bad_rows: 'skipp' is not a choice; did you mean 'skip'? choose from error, skip"]


def test_an_unknown_experiment_names_the_closest_and_where_the_rest_are(raw_config):
    plan = Plan(prepare_config(raw_config, lazy=True))
    with pytest.raises(ConfigError) as err:
        plan.experiment("demo_cbee")
    count = len(plan.experiments)
    assert str(err.value) == (
        "unknown experiment 'demo_cbee'\n"
        "  did you mean 'demo_cbe', 'demo_ce' or 'demo_simcse'?\n"
        f"  all {count} experiments: .venv/bin/augsbert list experiments\n"
        "  defined in a config file of your own? Name that file: snakemake --configfile my.yaml -- "
        "results/demo_cbee.json (`--` ends the list of config files), or augsbert ... --config my.yaml")
    with pytest.raises(ConfigError) as err:
        grid_spec(plan, "zzz")
    assert str(err.value).split("\n")[:2] == ["unknown grid 'zzz'", "  no grid has a similar name"]
    assert "results/tables/zzz.md" in str(err.value)


def test_a_results_file_or_a_target_given_as_a_config_says_what_happened(tmp_path, monkeypatch):
    from augsbert.config.load import load_configs
    from augsbert.config.yaml_files import check_config_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text('{"experiment": "x", "config_hash": "abc", "models": {}}')
    with pytest.raises(ConfigError) as err:
        check_config_file("results/x.json")
    assert str(err.value) == (
        "results/x.json was read as a config file, but it is a results file. Snakemake's --configfile takes every "
        "path after it up to the next option, so a target written after it becomes one more config file: end the "
        "config files with `--` (snakemake -n --configfile my.yaml -- results/x.json) or name the targets first")
    with pytest.raises(ConfigError) as err:
        load_configs(["results/x.json"])  # the CLI's --config
    assert str(err.value) == ("--config results/x.json: it is a results file; --config takes config YAML files "
                              "(config/config.yaml, a file of your own), and every word after it up to the next "
                              "option: write a name or a target before --config, or as the option it is (e.g. "
                              "--experiment NAME)")  # issue 56 R8: typed after --config, as it takes several
    (tmp_path / "notes.yaml").write_text("title: x\nitems: [1, 2]\n")
    with pytest.raises(ConfigError) as err:
        load_configs(["notes.yaml"])
    assert str(err.value).startswith("--config notes.yaml: it is not a config (top-level keys title, items; a config "
                                     "has data_dir, seeds, ")
    (tmp_path / "mine.yaml").write_text("experiments: {e: {dataset: lee}}\n")
    check_config_file("mine.yaml")  # a config of one section is a config


def test_config_files_merge_over_the_shipped_config_as_snakemake_does(tmp_path, monkeypatch):
    from augsbert.config.load import load_configs
    from augsbert.config.yaml_files import config_files

    monkeypatch.chdir(REPO)
    mine = tmp_path / "mine.yaml"
    mine.write_text("experiments:\n  mine_zeroshot: {dataset: lee, models: [zero_shot]}\n  demo_cbe: {teacher: {lr: 1.0e-5}}\n"
                    "defaults:\n  student: {lr: 1.0e-5}\n")
    assert config_files([mine]) == [REPO / "config" / "config.yaml", mine] or config_files([mine])[1:] == [mine]
    assert config_files(["config/config.yaml", mine])[1:] == [mine]  # the shipped one once
    config = load_configs([mine], lazy=True)
    assert {"mine_zeroshot", "demo_cbe"} <= set(config["experiments"])  # both files' experiments
    assert config["experiments"]["demo_cbe"]["student"]["lr"] == 1.0e-5  # my defaults under the shipped experiment
    assert config["experiments"]["demo_cbe"]["teacher"] == {"arch": "cbe", "lr": 1.0e-5}  # merged key by key
    other = tmp_path / "other.yaml"
    other.write_text("experiments:\n  mine_zeroshot: {models: [zero_shot, lower_bound]}\n")
    assert load_configs([mine, other], lazy=True)["experiments"]["mine_zeroshot"]["models"] == ["zero_shot",
                                                                                              "lower_bound"]
    monkeypatch.chdir(tmp_path)  # no config/config.yaml here: the given files alone
    assert config_files([mine]) == [mine]
    with pytest.raises(ConfigError, match="no config: config/config.yaml is not in the current directory"):
        config_files([])


def test_old_section_names_are_read_as_the_new_ones_with_one_line_each(tmp_path, monkeypatch, capsys):
    """issues 48, 59: silver -> labels, sampling -> candidates, adapt_mlm -> adapt, evaluation -> suite, in defaults,
    experiments, grid options, axes and columns, and in grid files; one line per key naming the file and the new
    name. The shipped configs use the new names (no line)."""
    from augsbert.config.load import load_configs

    monkeypatch.chdir(REPO)
    for shipped in [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "measure").glob("*.yaml")),
                    REPO / ".test" / "config" / "config.yaml"]:
        read_config(shipped)  # with the grid files beside it
    assert capsys.readouterr().err == ""
    mine = tmp_path / "mine.yaml"
    mine.write_text("defaults: {silver: {batch_size: 32}}\n"
                    "experiments: {old_names: {dataset: lee, models: [student], sampling: {top_k: 2},\n"
                    "                          evaluation: {max_length: 64}}}\n"
                    "grids: {old_grid: {columns: {lee: {dataset: lee, silver: {relabel_gold: false}}},\n"
                    "                   options: {models: [student], adapt_mlm: {epochs: 3}},\n"
                    "                   axes: {a: {x: {sampling: {top_k: 4}}}}}}\n")
    config = load_configs([mine], lazy=True)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{mine}: defaults.silver is now `labels`; read as `labels` (rename it)",
                   f"{mine}: experiments.old_names.sampling is now `candidates`; read as `candidates` (rename it)",
                   f"{mine}: experiments.old_names.evaluation is now `suite`; read as `suite` (rename it)",
                   f"{mine}: grids.old_grid.options.adapt_mlm is now `adapt`; read as `adapt` (rename it)",
                   f"{mine}: grids.old_grid.axes.a.x.sampling is now `candidates`; read as `candidates` (rename it)",
                   f"{mine}: grids.old_grid.columns.lee.silver is now `labels`; read as `labels` (rename it)"]
    assert config["defaults"]["labels"]["batch_size"] == 32 and "silver" not in config["defaults"]
    assert config["experiments"]["old_names"]["candidates"]["top_k"] == 2
    assert config["experiments"]["old_names"]["labels"]["batch_size"] == 32
    assert config["experiments"]["old_names"]["suite"]["max_length"] == 64 and "evaluation" not in config[
        "experiments"]["old_names"]
    cell = config["experiments"]["old_grid.x.lee"]
    assert (cell["adapt"]["epochs"], cell["candidates"]["top_k"], cell["labels"]["relabel_gold"]) == (3, 4, False)

    grids = tmp_path / "grids"  # a grid file of the config's folder
    grids.mkdir()
    (grids / "g.yaml").write_text("columns: {lee: {dataset: lee}}\noptions: {silver: {batch_size: 8}}\n")
    (tmp_path / "config.yaml").write_text("experiments: {}\n")
    assert read_config(tmp_path / "config.yaml")["grids"]["g"]["options"] == {"labels": {"batch_size": 8}}
    assert capsys.readouterr().err == (f"{grids / 'g.yaml'}: grid.options.silver is now `labels`; read as `labels` "
                                       "(rename it)\n")

    # Snakemake's merged config (no file to name), and both names at one place: refused
    assert prepare_config({**read_config(REPO / "config" / "config.yaml"), "defaults": {"sampling": {"top_k": 3}}},
                          lazy=True)["defaults"]["candidates"]["top_k"] == 3
    assert "config: defaults.sampling is now `candidates`" in capsys.readouterr().err
    mine.write_text("defaults: {silver: {batch_size: 32}, labels: {batch_size: 16}}\n")
    with pytest.raises(ConfigError, match=r"defaults.silver and defaults.labels are both set; `silver` is the old "
                                          r"name of `labels`: keep `labels` only"):
        load_configs([mine], lazy=True)


def test_c2_old_section_names_over_a_shipped_experiment_plan_alike_in_snakemake_and_the_cli(tmp_path, monkeypatch):
    """Issue 56 C2: `defaults.silver` and `sampling` in a user's --configfile over a shipped experiment were accepted
    by `augsbert plan` / `run` (each file renamed before merging) but stopped Snakemake and the rehearsal with
    "defaults.silver and defaults.labels are both set" (Snakemake merged the user's file over config/config.yaml,
    which writes `labels`, before the workflow renamed anything). Now the workflow builds its config from the
    files as the CLI does: the same jobs, the same keys, and the renames named at the user's file."""
    from augsbert.config.load import load_configs
    from workflow_helpers import checkout, keep_experiments, snakemake

    work = checkout(tmp_path / "repo")
    keep_experiments(work, "demo_augsbert_cbe")
    (work / "my.yaml").write_text("defaults:\n  silver: {relabel_gold: false}\n"
                                  "experiments:\n  demo_augsbert_cbe:\n    sampling: {top_k: 2}\n")
    proc = snakemake(work, "-n", "--configfile", "my.yaml", "--", "results/demo_augsbert_cbe.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("my.yaml: defaults.silver is now `labels`; read as `labels` (rename it)\n"
            "my.yaml: experiments.demo_augsbert_cbe.sampling is now `candidates`; read as `candidates` (rename it)\n"
            in proc.stdout + proc.stderr)
    monkeypatch.chdir(work)
    plan = Plan(load_configs(["my.yaml"], lazy=True))
    planned = {plan.node(key).path for key in plan.experiment("demo_augsbert_cbe").runs[42].values()}
    written = {f"artifacts/{p.parent.name}/{p.stem}" for p in (work / "artifacts" / ".specs").glob("*/*.json")}
    assert planned <= written and {p for p in planned if "/candidates/" in p or "/labels/" in p}
    candidates = next(p for p in (work / "artifacts" / ".specs" / "candidates").glob("*.json"))
    assert json.loads(candidates.read_text())["params"]["top_k"] == 2
    labels = next(p for p in (work / "artifacts" / ".specs" / "labels").glob("*.json"))
    assert json.loads(labels.read_text())["params"]["relabel_gold"] is False
