"""Running the bf binary: plainly, crashed at a fault point, paused at a pause point while other
writers work, or held at its question on a pseudo-terminal (util-linux `script`) while others work.

The binary is the one `BF_BIN` names: built with the test hooks (`cargo build --features test-hooks`
or the test build), or the fault and pause points are inert and those histories say so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

TIMEOUT = 180



def wait_until(child, condition) -> bool:
    """Whether `condition` came true before `child` ended or TIMEOUT passed, polled every 10 ms."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if condition():
            return True
        if child.poll() is not None:
            return False
        time.sleep(0.01)
    return False

class Run:
    def __init__(self, args: list[str], code: int | None, stdout: str, stderr: str, seconds: float,
                 fault: str | None = None):
        self.args = args
        self.code = code
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        self.fault = fault

    @property
    def said(self) -> str:
        return self.stdout + self.stderr

    @property
    def crashed_on_purpose(self) -> bool:
        """Aborted at the fault point the run named (BF_FAULT aborts: SIGABRT)."""
        return self.fault is not None and self.code == -signal.SIGABRT

    def panicked(self) -> bool:
        return "panicked at" in self.stderr or self.code == 101 or (
            self.code is not None and self.code < 0 and not self.crashed_on_purpose
            and self.code != -signal.SIGKILL)

    def summary(self) -> str:
        tail = "\n".join((self.stderr or self.stdout).strip().splitlines()[-12:])
        return f"bf {' '.join(self.args)} -> exit {self.code}\n{tail}"


def clean_env(root: str) -> dict:
    """The environment bf runs in: nothing of the shell's BF_* or OPENLINEAGE_* (a variable left in a
    shell must not steer a history), the root set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BF_", "OPENLINEAGE_"))}
    env["BF_ROOT"] = root
    env["NO_COLOR"] = "1"
    return env


class Bf:
    def __init__(self, binary: str, root: str):
        self.binary = binary
        self.root = root
        self.runs: list[Run] = []

    def run(self, cwd: str, args: list[str], env: dict | None = None, fault: str | None = None) -> Run:
        full_env = clean_env(self.root)
        if fault:
            full_env["BF_FAULT"] = fault
        full_env.update(env or {})
        start = time.monotonic()
        try:
            p = subprocess.run([self.binary, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                               timeout=TIMEOUT)
            run = Run(args, p.returncode, p.stdout, p.stderr, time.monotonic() - start, fault)
        except subprocess.TimeoutExpired as e:
            run = Run(args, None, _text(e.stdout), _text(e.stderr) + "\n(timed out)", time.monotonic() - start,
                      fault)
        self.runs.append(run)
        return run

    def run_paused(self, cwd: str, args: list[str], slice_: int | None, point: str, meanwhile) -> tuple[Run, bool]:
        """`bf ARGS` paused at `point` of slice `slice_` (BF_PAUSE_*): `meanwhile()` runs while it
        waits there, then it goes on. Returns its run and whether it paused at all (a run refused
        before that point never pauses; `meanwhile` then runs after it)."""
        pause = os.path.join(cwd, f".pause-{time.monotonic_ns()}")
        env = clean_env(self.root)
        env["BF_PAUSE_FILE"] = pause
        env["BF_PAUSE_POINT"] = point
        if slice_ is not None:
            env["BF_PAUSE_SLICE"] = str(slice_)
        start = time.monotonic()
        child = subprocess.Popen([self.binary, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        out: dict = {}
        reader = threading.Thread(target=lambda: out.update(zip(("stdout", "stderr"), child.communicate())))
        reader.start()
        paused = wait_until(child, lambda: os.path.exists(pause))
        try:
            meanwhile()
        finally:
            if os.path.exists(pause):
                os.remove(pause)
            reader.join(TIMEOUT)
            if reader.is_alive():
                child.kill()
                reader.join()
        run = Run(args, child.returncode, out.get("stdout", ""), out.get("stderr", ""), time.monotonic() - start)
        self.runs.append(run)
        return run, paused

    def run_at_prompt(self, cwd: str, args: list[str], meanwhile, answer: str = "yes") -> tuple[Run, bool]:
        """`bf ARGS` on a pseudo-terminal (util-linux `script`): once it asks, `meanwhile()` runs, then
        `answer` is typed. Returns its run and whether it asked."""
        import shlex

        command = " ".join(shlex.quote(a) for a in [self.binary, *args])
        env = clean_env(self.root)
        start = time.monotonic()
        child = subprocess.Popen(["script", "-qec", command, "/dev/null"], cwd=cwd, env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        printed = bytearray()

        def read():
            while True:
                chunk = child.stdout.read1(4096) if hasattr(child.stdout, "read1") else child.stdout.read(1)
                if not chunk:
                    break
                printed.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        asked = wait_until(child, lambda: b"Only 'yes' will be accepted" in printed)
        try:
            meanwhile()
        finally:
            try:
                if child.poll() is None:
                    child.stdin.write((answer + "\n").encode())
                    child.stdin.flush()
                    child.stdin.close()
            except BrokenPipeError:
                pass
            try:
                child.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            reader.join()
        text = printed.decode(errors="replace").replace("\r\n", "\n")
        run = Run(args, child.returncode, "", text, time.monotonic() - start)
        self.runs.append(run)
        return run, asked


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value
