"""`mementograph demo` whose user presses Ctrl-C during request N, as its own process, for `test_ctrl_c.py`.

    python -m tests.reliability._ctrl_c_demo N PRESSES DEMO_ARGS...

The process sends itself PRESSES real SIGINTs from the demo's progress callback of request N, after printing
`interrupting at request N` on stderr. A signal sent to oneself is handled at the next bytecode of the main
thread, so the interrupt lands at the same place every time: inside the agent run's task, in a capability hook
(the demo's meter), right after the request's compaction -- where it used to leave the process hanging at exit.
"""

from __future__ import annotations

import os
import signal
import sys

from mementograph.cli import _demo, main


def run(argv: list[str]) -> int:
    request, presses, *demo_args = argv
    progress = _demo.Progress.step

    def interrupting(self: _demo.Progress, step: _demo.Step) -> None:
        progress(self, step)
        if step.number == int(request):
            print(f'interrupting at request {step.number}', file=sys.stderr, flush=True)
            for _ in range(int(presses)):
                os.kill(os.getpid(), signal.SIGINT)

    _demo.Progress.step = interrupting  # type: ignore[method-assign]
    return main(['demo', *demo_args])


if __name__ == '__main__':
    sys.exit(run(sys.argv[1:]))
