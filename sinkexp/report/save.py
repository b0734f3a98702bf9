"""The one way a figure of `sinkexp report` reaches the disk: `Saver`, in the formats and at the dpi
the command asks for (`sinkexp report DIR --format png,pdf --dpi 200`; docs/sweeps.md).

Every figure of report/figures.py, maps.py, steps.py and positions.py, and examples/inspect_run.py,
goes through a Saver: PNG (a raster, drawn at `dpi`), PDF and SVG (vector: lines and text stay
sharp at any zoom; an attention map is embedded in them as an image, at `dpi`). Each file is
written atomically (rundir/files.py), its bounding box cut to what is drawn (no clipped title, no
margin of white), and the figure is closed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt

from sinkexp.config.settings import DPI, FORMATS
from sinkexp.errors import ConfigError
from sinkexp.rundir.files import write_bytes


@dataclass(frozen=True)
class Saver:
    """Where a figure goes: `formats` (a file per format, the path's suffix replaced) at `dpi`."""

    formats: tuple[str, ...] = ("png",)
    dpi: int = DPI

    def __call__(self, fig, path: Path) -> list[Path]:
        """Write `fig` as `path` in each format and close it; returns the files written."""
        written = []
        try:
            for kind in self.formats:
                buffer = io.BytesIO()
                fig.savefig(buffer, format=kind, dpi=self.dpi, bbox_inches="tight", pad_inches=0.1)
                written.append(Path(path).with_suffix(f".{kind}"))
                write_bytes(written[-1], buffer.getvalue())
        finally:
            plt.close(fig)
        return written


def saver(formats: str = "png", dpi: int = DPI) -> Saver:
    """A Saver from the command line's `--format png,pdf` and `--dpi N`; ConfigError, one line, for
    a format or dpi it cannot write."""
    chosen = tuple(dict.fromkeys(part.strip().lower().lstrip(".") for part in formats.split(",") if part.strip()))
    unknown = [kind for kind in chosen if kind not in FORMATS]
    if unknown or not chosen:
        raise ConfigError(
            f"--format {formats} is not valid; choose one or more of {', '.join(FORMATS)}, comma-separated"
        )
    if not 10 <= dpi <= 1200:
        raise ConfigError(f"--dpi {dpi} is not valid; it must lie in [10, 1200] (PNG pixels per inch)")
    return Saver(chosen, dpi)
