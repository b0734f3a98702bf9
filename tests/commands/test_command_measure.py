"""`sinkexp measure`'s command line (commands/measure.py): read once with Hydra's grammar and sweep
order, typed by the schema, and a sweep printed as `sinkexp train -m` prints one."""

from hf_models import tiny
from test_cli import sinkexp

from sinkexp.commands.measure import parse, values


def test_the_command_line_reads_as_train_reads_it():
    """config/compose.py's parsing and sweep order: quotes and escapes removed, values typed, the
    later key varying fastest."""
    multirun, jobs = parse(["-m", "m", "text='my file.txt'", "n=3,4", "revision=null,'a b'"])
    jobs = [values(job) for job in jobs]
    assert multirun and [(job["n"], job["revision"]) for job in jobs] == [(3, None), (3, "a b"), (4, None), (4, "a b")]
    assert {job["model"] for job in jobs} == {"m"} and {job["text"] for job in jobs} == {"my file.txt"}


def test_a_measure_sweep_has_train_sweeps_job_headers_and_closing_line(tmp_path):
    folder = tiny("gpt2", tmp_path / "g")
    result = sinkexp("measure", "-m", str(folder), "n=2,3", "seq_len=8", "name=both", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    headers = [line for line in lines if line.startswith("== job")]
    assert headers == [
        f"== job 0: model={folder} n=2 seq_len=8 name=both",
        f"== job 1: model={folder} n=3 seq_len=8 name=both",
    ]
    assert lines[-1] == f"sweep: 2 of 2 runs finished, in {tmp_path}/outputs/sweeps/both"


def test_help_lists_every_key_with_its_default_and_meaning_from_the_schema(tmp_path):
    import dataclasses

    from sinkexp.config.settings import MeasureConfig

    helped = sinkexp("measure", "--help", cwd=tmp_path).stdout.splitlines()
    keys = [line.split()[0] for line in helped if line.startswith("    ") and "=" in line.split()[0]]
    assert keys == [
        f"{f.name}={'null' if f.default is None else str(f.default).lower()}" for f in dataclasses.fields(MeasureConfig)
    ]
    assert "    n=100               sequences (Gu et al. 2025's eval_sink_open_source.py: 100 x 64)" in helped
