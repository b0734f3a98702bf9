"""The `sinkexp` console script and `python -m sinkexp`: Ctrl-C and SIGTERM are handled from the
entry's first instructions, before anything of sinkexp, torch or Hydra is imported.

The two signals are held (blocked) while machine/preemption.py imports, then its handler is put in
place and they are let through: a signal at any moment of start-up ends the command with one line
(`sinkexp: stopped by SIGTERM while starting (nothing written)`) and exit status 143 (130 for
Ctrl-C), never a traceback or a silent death (the default actions before a handler is in place).
cli.main takes it from there.
"""

import signal

STOPPING = {signal.SIGINT, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)  # held while the handler's module imports
from sinkexp.machine import preemption  # noqa: E402

preemption.stop_on_signals(at_once=True)
signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # one that arrived meanwhile is handled here

from sinkexp.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
