"""`sinkexp report DIR --list` (report/listing.py): a line per run from its files, nothing written."""

import shutil

from conftest import QUICK

from sinkexp.jobs.runner import run
from sinkexp.report.listing import last_step, listing
from sinkexp.report.runs import main
from sinkexp.rundir import files as rundir_files


def test_each_run_is_one_line_with_its_status_settings_step_and_hash(tmp_path, make_config):
    run(make_config(*QUICK, "attn=relu", "seed=1", "model.n_layers=2"), tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # a copy stopped before step 30: logged up to step 25
    (tmp_path / "b" / rundir_files.DONE).unlink()
    losses = (tmp_path / "b" / rundir_files.LOSSES).read_text().splitlines()
    (tmp_path / "b" / rundir_files.LOSSES).write_text("\n".join(r for r in losses if not r.startswith("30,")) + "\n")
    digest = rundir_files.read_json(tmp_path / "a" / rundir_files.META)["config_hash"]
    header, done, stopped = (line.split() for line in listing(tmp_path, width=200))
    assert header == ["status", "task", "attn", "depth", "seed", "step", "hash", "run"]
    assert done == ["done", "trigger", "relu", "L2", "1", "30", digest, "a"]
    assert stopped == ["incomplete", "trigger", "relu", "L2", "1", "25", digest, "b"]


def test_a_measured_run_lists_its_model_and_a_long_folder_is_cut_to_the_width(tmp_path):
    run_dir = tmp_path / "measures" / ("m" * 80)
    rundir_files.write_text(
        run_dir / rundir_files.CONFIG,
        "command: measure\nmodel: /models/x\nstep: -1\nmeasured:\n  model_type: gpt2\n  n_layers: 3\n",
    )
    rundir_files.write_json(run_dir / rundir_files.META, {"config_hash": "0123abcd"})
    rundir_files.write_text(run_dir / rundir_files.DONE, "")
    lines = listing(tmp_path, width=70)
    assert max(map(len, lines)) <= 70
    assert lines[1].split()[:7] == ["done", "measure", "gpt2", "L3", "-", "?", "0123abcd"]
    assert lines[1].endswith("m" * 10) and "..." in lines[1]


def test_the_last_step_is_read_from_the_table_end(tmp_path):
    table = tmp_path / "losses.csv"
    table.write_text("step,split,loss\n" + "".join(f"{step},train,0.{step}\n" for step in range(0, 5000, 5)))
    assert last_step(table) == "4995"
    table.write_text("step,split,loss\n")
    assert last_step(table) == "-" and last_step(tmp_path / "none.csv") == "-"


def test_the_list_option_prints_and_writes_nothing(tmp_path, make_config, capsys):
    run(make_config(*QUICK), tmp_path / "r")
    assert main([str(tmp_path), "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].startswith("done") and not (tmp_path / "report").exists()
