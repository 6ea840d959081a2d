"""A wall-clock sampler of every thread of a process (``EQUIV_SAMPLE_MS``, with
``EQUIV_PROF_DIR``; loaded by sitecustomize.py): every few milliseconds it reads each thread's
stack (``sys._current_frames``) and counts, per thread, each function on the stack (inclusive)
and the function on top (self). Unlike cProfile it sees the gate's other threads (the judge
beside the draws) and time spent waiting. ``PID.samples.txt`` is written at exit. A
development aid, not shipped."""
import collections
import os
import sys
import threading
import time


class Sampler:
    def __init__(self, where: str, every_ms: float):
        self.where, self.every = where, every_ms / 1000.0
        self.inclusive = collections.defaultdict(collections.Counter)
        self.own = collections.defaultdict(collections.Counter)
        self.ticks = collections.Counter()
        self.stop = False
        self.thread = threading.Thread(target=self._run, name="equiv-sampler", daemon=True)
        self.thread.start()

    @staticmethod
    def _name(code) -> str:
        return f"{code.co_filename.rsplit('/', 2)[-2:][-1] if '/' in code.co_filename else code.co_filename}:{code.co_name}"

    def _run(self):
        me = threading.get_ident()
        while not self.stop:
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                who = names.get(ident, str(ident))
                self.ticks[who] += 1
                seen, top = set(), None
                while frame is not None:
                    code = frame.f_code
                    key = f"{code.co_filename.split('site-packages/')[-1].split('/work/')[-1]}:{code.co_name}"
                    top = top or key
                    seen.add(key)
                    frame = frame.f_back
                for key in seen:
                    self.inclusive[who][key] += 1
                self.own[who][top] += 1
            time.sleep(self.every)

    def dump(self, pid: int):
        self.stop = True
        with open(os.path.join(self.where, f"{pid}.samples.txt"), "w") as f:
            f.write(f"sample every {self.every * 1000:.0f} ms; counts are samples\n")
            for who, n in self.ticks.most_common():
                f.write(f"\n=== thread {who}: {n} samples ({n * self.every:.1f} s)\n-- inclusive\n")
                for key, c in self.inclusive[who].most_common(45):
                    f.write(f"{c:7d} {c * self.every:7.2f}s  {key}\n")
                f.write("-- own (top of stack)\n")
                for key, c in self.own[who].most_common(25):
                    f.write(f"{c:7d} {c * self.every:7.2f}s  {key}\n")
