"""One list of options: ``Options``' fields are convert's keywords - its signature and docstring, to_tfr's,
WriteDataset's and the ``convert`` command's flags are held to them - and a run's identity is made of the fields
marked ``identity``, so a re-run with any of them changed is refused, a new option included."""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

import tfrecorder
from tfrecorder.dataset.storage import Folder
from tfrecorder.errors import TFRecorderError
from tfrecorder.sample_data import make_instance_scenes
from tfrecorder.write.convert import convert
from tfrecorder.write.options import PIPELINE_SETTINGS, Options, option
from tfrecorder.write.run.resume import _what_differs, finished_key, start_run
from tfrecorder.write.settings import RunDigest

OPTIONS = fields(Options)
IDENTITY = [f for f in OPTIONS if f.metadata["identity"]]
NOT_EMPTY = r"output_dir .* is not empty \(.*dataset.json.*\): it holds a finished conversion made with other settings"


def test_convert_takes_the_options_in_their_order_with_their_defaults_each_documented():
    params = list(inspect.signature(convert).parameters.values())
    assert [p.name for p in params[:3]] == ["source", "output_dir", "schema"]
    assert [(p.name, p.default) for p in params[3:]] == [(f.name, f.default) for f in OPTIONS]
    documented = re.findall(r"^ {8}(\w+): ", convert.__doc__ or "", re.M)
    assert documented == ["source", "output_dir", "schema", *(f.name for f in OPTIONS)]


def test_to_tfr_passes_every_option_to_convert():
    params = inspect.signature(tfrecorder.accessor.TensorflowAccessor.to_tfr).parameters
    assert params["runner"].default == Options.runner
    assert list(params)[-1] == "kwargs" and params["kwargs"].kind is inspect.Parameter.VAR_KEYWORD


def test_write_dataset_takes_every_option_but_the_pipelines():
    from tfrecorder.beam import WriteDataset

    assert set(PIPELINE_SETTINGS) == {"runner", "progress", "num_workers", "project", "region", "pipeline_options",
                                      "dataflow_options",
                                      "job_label", "tfrecorder_wheel", "wait", "images_dir"}
    WriteDataset("out", **{f.name: f.metadata["other"] for f in OPTIONS if f.name not in PIPELINE_SETTINGS})
    for name in PIPELINE_SETTINGS:
        with pytest.raises(TFRecorderError, match=rf"WriteDataset\({name}=...\): these are settings of the pipeline"):
            WriteDataset("out", **{name: getattr(Options, name)})


def test_the_convert_command_has_a_flag_for_each_option_in_their_order():
    from tfrecorder.cli import _parser

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    flags = [a for a in commands["convert"]._actions if a.option_strings and a.dest not in ("help", "verbose")]
    with_flags = [f for f in OPTIONS if f.metadata["cli"]]
    assert [a.option_strings[0] for a in flags] == [f.metadata["flag"] or "--" + f.name.replace("_", "-")
                                                    for f in with_flags]
    for action, f in zip(flags, with_flags):
        assert action.help == f.metadata["help"]
        switch = isinstance(action, argparse._StoreTrueAction)
        assert action.default == (False if switch else None if f.metadata["parse"] else f.default), f.name


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple:
    """A small detection table with instance masks (every option applies to it, mask_from_instances too) and the
    folder of its finished conversion."""
    work = tmp_path_factory.mktemp("finished")
    scenes = make_instance_scenes(str(work / "scenes"), n=4, size=(32, 48))
    convert(scenes, str(work / "out"), progress=False)
    return scenes, work / "out"


@pytest.mark.parametrize("changed", IDENTITY, ids=[f.name for f in IDENTITY])
def test_a_finished_conversion_with_any_identity_option_changed_is_refused_naming_it(finished, changed):
    scenes, out = finished
    before = {p: p.stat().st_mtime_ns for p in Path(out).rglob("*")}
    was, now = (getattr(o.checked(), changed.name)
                for o in (Options(), Options(**{changed.name: changed.metadata["other"]})))
    assert was != now
    with pytest.raises(TFRecorderError, match=NOT_EMPTY) as refused:
        convert(scenes, str(out), progress=False, **{changed.name: changed.metadata["other"]})
    assert f"made with other settings ({changed.name}={was!r} there, {now!r} here)" in str(refused.value)
    assert {p: p.stat().st_mtime_ns for p in Path(out).rglob("*")} == before


@dataclass(frozen=True)
class _WithANewOption(Options):
    sharpen: float = option(0.0, "sharpen images by this much", identity=True, other=0.5)


def test_a_new_option_is_part_of_the_run_identity_and_a_resumed_run_refuses_it_changed(tmp_path):
    def identity(options: Options) -> tuple[str, dict[str, str]]:
        write_options = options.conversion().options
        run = RunDigest(None, write_options).hexdigest()
        return run, finished_key(run, write_options, None, runner="local").settings

    (first, settings), (second, other_settings) = identity(_WithANewOption()), identity(_WithANewOption(sharpen=0.5))
    assert first != second and identity(_WithANewOption(sharpen=0.0))[0] == first
    assert _what_differs(settings, other_settings) == " made with other settings (sharpen=0.0 there, 0.5 here)"

    folder = Folder.of(str(tmp_path / "out"))
    start_run(folder, first, [], overwrite=False, runner="local").lock.release()  # an unfinished run
    with pytest.raises(TFRecorderError, match="holds an unfinished conversion of a different table or settings"):
        start_run(folder, second, [], overwrite=False, runner="local")
    start_run(folder, first, [], overwrite=False, runner="local").lock.release()  # the same one resumes


def test_a_misspelt_write_dataset_keyword_is_one_line_naming_it():
    from tfrecorder.beam import WriteDataset

    with pytest.raises(TFRecorderError, match=r"WriteDataset\(num_shard=...\): no such keyword; .*: num_shards, "):
        WriteDataset("out", num_shard=2)
