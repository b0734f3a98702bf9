"""Every figure of `sinkexp report` goes through report/save.py's Saver: the formats and dpi asked for
(`--format png,pdf --dpi 200`), each file written whole, a bad format or dpi one line and exit 2."""

import matplotlib.pyplot as plt
import pytest
from conftest import QUICK
from matplotlib.image import imread

from sinkexp.errors import ConfigError
from sinkexp.jobs.runner import run
from sinkexp.report.runs import main
from sinkexp.report.save import Saver, saver


def figure():
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title")
    return fig


def test_a_saver_writes_each_format_at_its_dpi_and_closes_the_figure(tmp_path):
    fig = figure()
    written = saver("png,pdf,svg", 100)(fig, tmp_path / "f.png")
    assert [path.name for path in written] == ["f.png", "f.pdf", "f.svg"] and not plt.fignum_exists(fig.number)
    assert written[1].read_bytes().startswith(b"%PDF") and b"<svg" in written[2].read_bytes()[:500]
    twice = Saver(("png",), 200)(figure(), tmp_path / "g.png")[0]
    small, large = imread(written[0]), imread(twice)
    assert large.shape[1] == pytest.approx(2 * small.shape[1], abs=2)  # pixels per inch, to the pixel


@pytest.mark.parametrize(
    "formats,dpi,message",
    [
        ("png,jpg", 120, "--format png,jpg is not valid; choose one or more of png, pdf, svg, comma-separated"),
        (",", 120, "--format , is not valid; choose one or more of png, pdf, svg"),
        ("png", 0, "--dpi 0 is not valid; it must lie in [10, 1200]"),
    ],
)
def test_a_format_or_dpi_it_cannot_write_is_one_line(formats, dpi, message):
    with pytest.raises(ConfigError) as err:
        saver(formats, dpi)
    assert str(err.value).startswith(message)


def test_report_writes_every_figure_in_every_format_asked_for(make_config, tmp_path, capsys):
    run(make_config(*QUICK, "model.n_heads=2"), tmp_path / "runs/r")
    assert main([str(tmp_path / "runs"), "--format", "png,svg", "--dpi", "60"]) == 0
    out = tmp_path / "runs/report"
    pngs, svgs = sorted(p.stem for p in out.glob("*.png")), sorted(p.stem for p in out.glob("*.svg"))
    assert pngs == svgs == ["attention_all_runs", "dynamics", "heads_all_runs", "sink_attn_by_layer"]
    assert main([str(tmp_path / "runs"), "--format", "gif"]) == 2
    assert capsys.readouterr().err == (
        "sinkexp: error: --format gif is not valid; choose one or more of png, pdf, svg, comma-separated\n"
    )
