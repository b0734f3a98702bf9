"""The papers `sinkexp reproduce` knows: one file each, holding its experiments and claims; and
sinkexp's own experiment sets declared the same way (ladder)."""
from sinkexp.reproduce.papers import barbero2025, fesser2026, gu2025, guo2024, ladder, ranmilo2026, sun2026

PAPERS = {paper.name: paper for paper in (ranmilo2026.PAPER, fesser2026.PAPER, guo2024.PAPER, sun2026.PAPER,
                                          gu2025.PAPER, barbero2025.PAPER, ladder.PAPER)}
