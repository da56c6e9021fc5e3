"""The checks of a fault test: each prints "ok" or "FAILED" with what it checked and, for a failed
run of castor-run, its exit status and the end of its stderr; `failures` lists the failed ones."""


class Checks:
    def __init__(self, stderr_tail=800):
        self.failures = []
        self.stderr_tail = stderr_tail

    def expect(self, ok, what, run=None):
        print(("ok      " if ok else "FAILED  ") + what)
        if not ok:
            self.failures.append(what)
            if run is not None:
                print("        exit %d; stderr ends: %s" % (run.returncode, run.stderr.strip()[-self.stderr_tail:]))
